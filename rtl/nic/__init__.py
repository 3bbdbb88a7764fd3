"""The MAC-routed scale-up NIC: TX framer, TX with credits, RX checker/writer."""
