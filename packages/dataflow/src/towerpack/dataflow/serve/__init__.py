"""Data servers (`dataflow serve`), their exact-resume sessions, and the consumers that read them."""
