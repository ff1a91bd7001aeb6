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

/// Sweep and max-batch CSVs (read by `report`, `plot`, and by `sweep` and
/// `max-batch` when they resume). A row is about 200 bytes: over a
/// million rows, far more than any sweep makes.
pub const MAX_CSV_BYTES: u64 = 256 << 20;

/// At most `limit` bytes from `reader`; more is an error of kind
/// [`io::ErrorKind::FileTooLarge`], which callers tell from a failed read.
pub fn read_capped(reader: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {limit} bytes, the most an input file of this kind may hold"),
        ));
    }
    Ok(bytes)
}

/// The file's text, if it is UTF-8 and at most `limit` bytes, without a
/// leading byte-order mark: editors on Windows start UTF-8 files with one,
/// and the YAML parser took it for a key (`missing field 'compute'` of a
/// device file that has it).
pub fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    let bytes = read_capped(std::fs::File::open(path)?, limit)?;
    let mut text = String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })?;
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}

/// Far deeper than any input file nests (a graph file nests four levels,
/// device and budget files two), and shallow enough that the YAML
/// parser's recursion stays instant: it takes about a minute on a file of
/// a few thousand nested brackets, minutes on 200,000.
pub const MAX_NESTING: usize = 64;

/// Refuses YAML (or JSON) text whose flow collections (`[...]`, `{...}`)
/// nest more than [`MAX_NESTING`] deep, before the YAML parser sees it.
///
/// Why a scan of its own: the parser is what is slow on such a file, so
/// the check must not need it. The scan follows YAML's tokens closely
/// enough that only brackets the parser would take for collections
/// count: brackets inside quoted strings, comments, block scalars (`|`,
/// `>`) and plain scalars (`note: a[[[`, where a bracket inside a word or
/// after a space is text) are text, so a note quoting code is not refused.
/// Where it cannot tell, it counts: a wrong count refuses a file with
/// an odd note, a missed one would let a deeply nested file reach the
/// parser.
pub fn check_nesting(text: &str) -> Result<(), String> {
    let mut scan = Nesting::default();
    for line in text.split('\n') {
        scan.line(line.strip_suffix('\r').unwrap_or(line))?;
    }
    Ok(())
}

/// What a line starts inside of, carried from the line before.
#[derive(Default, Clone, Copy, PartialEq)]
enum Carry {
    #[default]
    Nothing,
    /// A quoted scalar (`'` or `"`) still open.
    Quote(u8),
    /// A block scalar whose header was on an earlier line: the column its
    /// parent collection sits at (-1 at the top) and, once its first line
    /// is seen, the column its text is indented to.
    Block {
        parent: isize,
        indent: Option<usize>,
    },
    /// A plain scalar that may go on: in block context it does on a line
    /// indented past `parent`, in flow context on any line.
    Plain { parent: isize },
}

/// A flow indicator: ends a plain scalar inside `[...]` or `{...}`.
fn flow(c: u8) -> bool {
    matches!(c, b',' | b'[' | b']' | b'{' | b'}')
}

#[derive(Default)]
struct Nesting {
    depth: usize,
    carry: Carry,
}

impl Nesting {
    fn open(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(format!("nested more than {MAX_NESTING} levels deep"));
        }
        Ok(())
    }

    fn line(&mut self, line: &str) -> Result<(), String> {
        // Bytes, not chars: every indicator is ASCII, and a column counted
        // in bytes is never less than in chars, which only makes a
        // scalar end sooner (more is scanned, nothing is skipped).
        let chars = line.as_bytes();
        let indent = chars.iter().take_while(|&&c| c == b' ').count();
        let blank = chars.iter().all(|c| c.is_ascii_whitespace());
        let mut i = 0;
        // A document marker ends any scalar but a quoted one.
        if (chars.starts_with(b"---") || chars.starts_with(b"..."))
            && chars.get(3).is_none_or(|c| c.is_ascii_whitespace())
            && !matches!(self.carry, Carry::Quote(_))
        {
            self.carry = Carry::Nothing;
            i = 3;
        }
        match self.carry {
            Carry::Block {
                parent,
                indent: want,
            } => {
                if blank {
                    return Ok(());
                }
                let want = want.unwrap_or_else(|| indent.max((parent + 1).max(1) as usize));
                if indent >= want {
                    self.carry = Carry::Block {
                        parent,
                        indent: Some(want),
                    };
                    return Ok(());
                }
                self.carry = Carry::Nothing;
            }
            Carry::Plain { parent } => {
                if blank {
                    return Ok(());
                }
                let goes_on = self.depth > 0 || indent as isize > parent;
                if !goes_on || chars.get(indent) == Some(&b'#') {
                    self.carry = Carry::Nothing;
                } else {
                    i = indent;
                }
            }
            Carry::Quote(_) | Carry::Nothing => {}
        }
        // The column of the collection the next node belongs to, as far
        // as this line shows it (a key's or a `-`'s column); None when the
        // line shows none, and the node's own column less one is used.
        let mut parent: Option<isize> = None;
        // The column where the current node began (an anchor or tag
        // before a key belongs to the key).
        let mut node_col: Option<usize> = None;
        let blank_at = |k: usize| chars.get(k).is_none_or(|c| c.is_ascii_whitespace());
        while i < chars.len() {
            let c = chars[i];
            // Inside a quoted scalar: look for its end.
            if let Carry::Quote(q) = self.carry {
                if q == b'"' && c == b'\\' {
                    i += 2;
                    continue;
                }
                if c == q {
                    if q == b'\'' && chars.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    self.carry = Carry::Nothing;
                }
                i += 1;
                continue;
            }
            // Inside a plain scalar: text up to `: `, ` #`, or (in flow
            // context) a flow indicator.
            if let Carry::Plain { .. } = self.carry {
                let ends = (c == b':'
                    && (blank_at(i + 1) || (self.depth > 0 && flow(chars[i + 1]))))
                    || (c == b'#' && (i == 0 || chars[i - 1].is_ascii_whitespace()))
                    || (self.depth > 0 && flow(c));
                if !ends {
                    i += 1;
                    continue;
                }
                self.carry = Carry::Nothing;
            }
            // Between tokens.
            match c {
                b' ' | b'\t' => {}
                b'#' => return Ok(()),
                b'[' | b'{' => self.open()?,
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                b',' if self.depth > 0 => {}
                b'"' | b'\'' => self.carry = Carry::Quote(c),
                b'|' | b'>' if self.depth == 0 => {
                    let parent = parent.unwrap_or(i as isize - 1);
                    self.carry = Carry::Block {
                        parent,
                        indent: None,
                    };
                    // An explicit indentation sets the text's column.
                    if let Some(d) = chars[i + 1..]
                        .iter()
                        .take_while(|c| matches!(c, b'1'..=b'9' | b'+' | b'-'))
                        .find(|c| c.is_ascii_digit())
                        .map(|c| (c - b'0') as isize)
                    {
                        self.carry = Carry::Block {
                            parent,
                            indent: Some((parent + d).max(1) as usize),
                        };
                    }
                    return Ok(());
                }
                // `:` right after a quoted key is an indicator too.
                b'-' | b'?' | b':'
                    if blank_at(i + 1)
                        || (c == b':'
                            && (self.depth > 0
                                || (i > 0 && matches!(chars[i - 1], b'"' | b'\'')))) =>
                {
                    if self.depth == 0 {
                        parent = Some(match c {
                            b':' => node_col.unwrap_or(i) as isize,
                            _ => i as isize,
                        });
                    }
                    node_col = None;
                }
                b'&' | b'!' | b'*' => {
                    node_col.get_or_insert(i);
                    while i + 1 < chars.len()
                        && !chars[i + 1].is_ascii_whitespace()
                        && !(self.depth > 0 && flow(chars[i + 1]))
                    {
                        i += 1;
                    }
                }
                b'%' if i == 0 => return Ok(()),
                _ => {
                    node_col.get_or_insert(i);
                    self.carry = Carry::Plain {
                        parent: parent.unwrap_or(i as isize - 1),
                    };
                }
            }
            i += 1;
        }
        Ok(())
    }
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

    fn deep(n: usize) -> String {
        "[".repeat(n)
    }

    #[test]
    fn deep_flow_collections_are_refused() {
        let refused = |t: &str| check_nesting(t).is_err();
        assert!(refused(&format!("{}1", deep(65))));
        assert!(refused(&format!("a: {}1", deep(65))));
        assert!(refused(&format!("- {}", "{a: ".repeat(65))));
        assert!(refused(&format!("a: !t &x {}", deep(65))));
        assert!(refused(&format!("\"a\":{}", deep(65))));
        assert!(refused(&format!("--- {}", deep(65))));
        // A block scalar ends where its indentation does.
        assert!(refused(&format!("a: |\n  text\nb: {}", deep(65))));
        assert!(refused(&format!("m:\n  a: |\n  b: {}", deep(65))));
        // A plain scalar goes on only on lines indented past its key.
        assert!(refused(&format!("m:\n  a: x\n  {}", deep(65))));
        // A quote inside a word or after a plain scalar's space is text,
        // and does not hide the brackets after it.
        assert!(refused(&format!("a: it's\nb: {}", deep(65))));
        assert!(refused(&format!("a: x 'y\nb: {}'", deep(65))));
        assert!(refused(&format!("a: [x 'y, {}]'", deep(65))));
        // Inside flow collections brackets always count.
        assert!(refused(&format!("a: [b{}", deep(65))));
        assert!(refused(&format!("{}1", deep(64) + "\n[")));
        assert!(check_nesting(&format!("{}1", deep(64))).is_ok());
    }

    #[test]
    fn brackets_that_are_text_are_not_counted() {
        let b = deep(100);
        for text in [
            format!("meta:\n  note: |\n    {b}\n    more {b}\n\n    {b}\nnodes: []\n"),
            format!("meta:\n  note: >-\n   {b}\nnodes: []\n"),
            format!("- |2\n   {b}\n- x\n"),
            format!("meta:\n  note: a{b}\nnodes: []\n"),
            format!("meta:\n  note: see {b} and {b}\n"),
            format!("note: x\n  {b}\n\n  {b}\nnext: 1\n"),
            format!("note: '{b}'\nq: \"a\\\"{b}\"\nr: 'it''s {b}'\n"),
            format!("note: \"multi\n  line {b}\"\n"),
            format!("a: 1 # {b}\n# {b}\n"),
            format!("{b}: 1\n").replacen('[', "x", 1),
            format!("- [a{b}]\n").replacen(&deep(100), &"a".repeat(100), 1),
        ] {
            assert_eq!(check_nesting(&text), Ok(()), "{text}");
        }
    }
}

/// A serde message as a user reads it: on one line, with the names of
/// remat's internal types and Rust's integer types replaced by what to
/// write ("invalid type: sequence, expected struct RawDevice" told a user
/// nothing about a device file).
pub fn plain_serde_message(msg: &str) -> String {
    let mut out = msg.split_whitespace().collect::<Vec<_>>().join(" ");
    // `struct RawX` (the shape of a section): a mapping.
    while let Some(at) = out.find("struct Raw") {
        let end = out[at + "struct ".len()..]
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .map_or(out.len(), |e| at + "struct ".len() + e);
        out.replace_range(at..end, "a mapping of keys");
    }
    for ty in [
        "u128", "i128", "u64", "i64", "u32", "i32", "u16", "u8", "usize",
    ] {
        out = out
            .replace(&format!(" as {ty}"), "")
            .replace(&format!("expected {ty}"), "expected a whole number");
    }
    for ty in ["f64", "f32"] {
        out = out.replace(&format!("expected {ty}"), "expected a number");
    }
    out
}

#[cfg(test)]
mod plain_tests {
    use super::plain_serde_message;

    #[test]
    fn internal_type_names_become_what_to_write() {
        assert_eq!(
            plain_serde_message("invalid type: sequence, expected struct RawDevice at line 1"),
            "invalid type: sequence, expected a mapping of keys at line 1"
        );
        assert_eq!(
            plain_serde_message("slow: invalid type: unit value, expected struct RawSlow"),
            "slow: invalid type: unit value, expected a mapping of keys"
        );
        assert_eq!(
            plain_serde_message(
                "invalid type: integer `18446744073709551616` as u128,\n expected u64"
            ),
            "invalid type: integer `18446744073709551616`, expected a whole number"
        );
        assert_eq!(
            plain_serde_message("invalid type: string \"1e9\", expected f64"),
            "invalid type: string \"1e9\", expected a number"
        );
    }
}
