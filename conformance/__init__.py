"""tilefoundry.conformance"""
