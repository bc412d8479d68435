//! Opal's Meta (shape-only) backend.
