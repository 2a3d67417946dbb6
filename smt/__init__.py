"""tilefoundry.smt: Z3 encodings of the semantic tables and laws, and the proof obligations.

The tables proved here are imported from ``tilefoundry.semantics`` — never restated."""
