//! Sans-IO protocol cores: bytes in, events and bytes out. Nothing here does IO,
//! spawns tasks or knows about wasm.

pub mod budget;
pub mod field_coding;
pub mod h2;
pub mod h3;

pub mod head;

#[cfg(test)]
mod test_util;
