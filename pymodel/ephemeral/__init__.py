"""Golden model of ephemeral delivery contexts (design 3): the pool, sender and receiver
twins."""
