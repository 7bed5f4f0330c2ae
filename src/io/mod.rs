//! Reading and writing files: CSV tables through serde ([`csv`]).

pub mod csv;
