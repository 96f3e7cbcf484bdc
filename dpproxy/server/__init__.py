"""``dpproxy serve``: the PostgreSQL wire protocol (v3) in front of the engine."""
