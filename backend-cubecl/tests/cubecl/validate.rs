//! Malformed arguments are rejected before launch.
