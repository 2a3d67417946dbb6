"""The reference evaluator (registry, driver, per-family implementations)."""
