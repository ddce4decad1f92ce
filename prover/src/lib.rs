//! The fused commit pipeline.
