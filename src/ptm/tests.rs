//! PTM tests.
