"""The ephemeral-context design (design 3) on the golden model: its points and the
state spectrum."""
