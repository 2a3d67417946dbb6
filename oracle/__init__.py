"""tilefoundry.oracle"""
