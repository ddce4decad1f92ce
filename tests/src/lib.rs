//! The conformance suite: generic tests every Backend implementation runs.
