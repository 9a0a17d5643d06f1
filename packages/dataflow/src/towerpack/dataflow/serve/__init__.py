"""Data servers (``dataflow serve``), their exact-resume sessions, and the consumers that read them.

Read ``server.py`` first (DataServer: credit-based, fair delivery to many consumers), then
``remote.py`` (RemoteDataZMQ, the consumer); ``session_host.py`` and ``session.py`` add exact resume.
"""
