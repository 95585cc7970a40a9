"""`pkb`: the command line for the leaderboard's REST API.

Plain Python over httpx and rich: it imports nothing of Django's ORM or torch, needs no
settings or database, and talks to a site only through its public API.
"""
