"""Forms submitted once and only once: single-use tokens in Redis, one
PostgreSQL transaction per token, and a UNIQUE column as the last line.

    tokens.py      TokenStore: issue (SET EX NX), consume (GETDEL), claim, release
    runner.py      submit_once / run_once: advisory lock, the one Redis step,
                   one transaction, and the outcome every duplicate gets
    extension.py   FormTokens, the Flask extension over both
    redis_urls.py  a Redis client from a URL: server, Cluster or Sentinel
"""
