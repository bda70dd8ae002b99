//! Sans-IO protocol cores: bytes in, events and bytes out. Nothing here does IO,
//! spawns tasks or knows about wasm.

/// Declares modules that are public with the `internals` feature, for the fuzz targets
/// and the tests that build frames and field sections by hand, and crate-private
/// without it: a driver needs only the connections, their events and error codes, and
/// the request heads.
macro_rules! internals {
    ($(mod $name:ident;)*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

pub mod h2;
pub mod h3;
pub mod head;

mod budget;
internals! {
    mod field_coding;
}

#[cfg(test)]
mod test_util;
