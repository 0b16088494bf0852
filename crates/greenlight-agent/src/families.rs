//! Building the dispatcher of one of this crate's own families: claude, codex and command.
//!
//! The openai family lives in `greenlight-openai`, so this crate never pulls in an HTTP stack;
//! the code that chooses among all four families lives with the binary, which knows them all.

use crate::dispatch::{Adapter, AdapterOptions, Dispatcher, Family};

/// Builds the dispatcher for an agent-CLI `family`. Fails for the command family without a
/// `bin`, and for the openai family, which this crate does not hold.
pub fn cli_dispatcher(
    family: Family,
    options: AdapterOptions,
) -> Result<Box<dyn Dispatcher>, crate::Error> {
    Ok(match family {
        Family::Claude => Box::new(Adapter {
            family: crate::claude::Claude,
            options,
        }),
        Family::Codex => Box::new(Adapter {
            family: crate::codex::Codex,
            options,
        }),
        Family::Command => {
            if options.bin.is_none() {
                return Err(crate::Error::CommandBinMissing);
            }
            Box::new(Adapter {
                family: crate::command::Command,
                options,
            })
        }
        Family::OpenAi => return Err(crate::Error::NotACliFamily(family)),
    })
}
