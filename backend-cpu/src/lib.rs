//! The CPU (rayon) backend: the default backend and the reference oracle.
