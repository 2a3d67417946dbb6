"""tilefoundry.semantics"""
