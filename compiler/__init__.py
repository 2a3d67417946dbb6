"""tilefoundry.compiler"""
