//! Input files read with a cap on their size. Why: a path that names an
//! endless or enormous file (`/dev/zero`, `/dev/urandom`, a dataset passed
//! by mistake) would otherwise be read into memory until the OOM killer
//! ends the process, with no message at all; capped, it gets the usual
//! one-line error naming the file.

use std::io::{self, Read};
use std::path::Path;

/// Graph and plan files. A ten-million-node training graph (the zoo's
/// largest) is about 1.6 GB of YAML.
pub const MAX_GRAPH_BYTES: u64 = 2 << 30;
/// Device and budget files: a few lines each.
pub const MAX_SMALL_BYTES: u64 = 16 << 20;

/// The file's text, if it is UTF-8 and at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes, the most an input file of this kind may hold"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_cap_is_refused_and_one_within_it_read() {
        let dir = std::env::temp_dir().join(format!("remat-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("ten.txt");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(read_text(&p, 10).unwrap(), "0123456789");
        let e = read_text(&p, 9).unwrap_err();
        assert!(e.to_string().starts_with("larger than 9 bytes"), "{e}");
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_text(&p, 10).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
