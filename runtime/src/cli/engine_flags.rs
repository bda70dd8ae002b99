//! One declaration per engine setting: [`engine_flags!`] turns a table of rows into a
//! clap `Args` struct (the row's doc comment is the flag's help, its default the
//! engine config's `Default`) and the code that writes each flag into the config.
//! A new setting is its field in the config and one row here.

/// Declares `$args`, the flags of the config type `$config`. Each row is the flag's
/// field, its type on the command line (anything `From` the config field's type and
/// `Into` it, such as `humantime::Duration` for a `Duration`), the config field it
/// sets (a path: `core.max_frame_size`), and optionally a clap value parser.
macro_rules! engine_flags {
    (
        $(#[$meta:meta])*
        pub struct $args:ident for $config:ty {
            $(
                $(#[doc = $doc:literal])+
                $flag:ident: $flag_ty:ty => $($field:ident).+ $(, parser = $parser:expr)?;
            )+
        }
    ) => {
        #[derive(clap::Args, Debug, Clone)]
        $(#[$meta])*
        pub struct $args {
            $(
                $(#[doc = $doc])+
                #[arg(
                    long,
                    default_value_t = <$flag_ty>::from(<$config>::default().$($field).+)
                    $(, value_parser = $parser)?
                )]
                pub $flag: $flag_ty,
            )+
        }

        impl $args {
            /// The engine configuration these flags describe.
            pub fn to_config(&self) -> $config {
                let mut config = <$config>::default();
                $( config.$($field).+ = self.$flag.clone().into(); )+
                config
            }
        }
    };
}

pub(super) use engine_flags;
