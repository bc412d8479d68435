//! Opal's CPU backend.
