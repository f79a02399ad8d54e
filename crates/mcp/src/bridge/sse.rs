//! The legacy HTTP+SSE client transport (protocol 2024-11-05). Not written yet.
