"""tilefoundry.smt"""
