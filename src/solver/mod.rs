//! MILP backends behind one small interface.

use std::fmt;
use std::str::FromStr;

/// Which MILP solver runs the model. Both are compiled into the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    #[default]
    Highs,
    Cbc,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Highs => "highs",
            Backend::Cbc => "cbc",
        })
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "highs" => Ok(Backend::Highs),
            "cbc" => Ok(Backend::Cbc),
            _ => Err(format!("unknown solver '{s}' (use highs or cbc)")),
        }
    }
}
