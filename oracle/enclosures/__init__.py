"""The enclosure rules, one module per op family (mirroring ``semantics/evaluator/``; D382).
``oracle/enclosure_rules.py`` imports every one of them, which registers the rules."""
