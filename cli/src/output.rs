//! Rendering for people (aligned tables) and for programs (JSON, YAML).

use serde::Serialize;

use crate::Output;

/// `println!` that never panics: a run's progress goes to a pipe that may
/// close (`stacksync reconcile --local | head`); the run must go on to its
/// end and release the stack, not die on the first line it cannot print.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that never panics (see [`say!`]).
#[macro_export]
macro_rules! put {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout();
        let _ = write!(out, $($arg)*);
        let _ = out.flush();
    }};
}

/// `eprintln!` that never panics (see [`say!`]).
#[macro_export]
macro_rules! warn_user {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Prints `value` as JSON or YAML. (Tables are rendered by each command.)
pub fn print_structured<T: Serialize>(format: Output, value: &T) -> Result<(), String> {
    let text = match format {
        Output::Json => serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n",
        _ => serde_yaml_ng::to_string(value).map_err(|e| e.to_string())?,
    };
    put!("{text}");
    Ok(())
}

/// A table with a header row; columns are padded to their widest cell.
#[derive(Debug)]
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: Vec<&'static str>) -> Self {
        Self {
            header,
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .chain(std::iter::once(self.header[i].len()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let header: Vec<String> = self.header.iter().map(|h| (*h).to_owned()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[i] - cell.chars().count();
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `text`, cut to `max` characters with an ellipsis; `-` when empty.
pub fn cell(text: Option<&str>, max: usize) -> String {
    match text.map(str::trim) {
        None | Some("") => "-".to_owned(),
        Some(t) => {
            let one_line = t.replace('\n', " ");
            if one_line.chars().count() > max {
                let cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
                format!("{cut}…")
            } else {
                one_line
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_trailing_space_is_trimmed() {
        let mut t = Table::new(vec!["NAME", "PHASE", "MESSAGE"]);
        t.row(vec!["a".into(), "Ready".into(), "-".into()]);
        t.row(vec!["longer-name".into(), "Failed".into(), "boom".into()]);
        assert_eq!(
            t.render(),
            "NAME         PHASE   MESSAGE\na            Ready   -\nlonger-name  Failed  boom\n"
        );
    }

    #[test]
    fn cells_are_cut_and_blank_ones_show_a_dash() {
        assert_eq!(cell(Some("abcdef"), 4), "abc…");
        assert_eq!(cell(Some("a\nb"), 10), "a b");
        assert_eq!(cell(None, 4), "-");
        assert_eq!(cell(Some("  "), 4), "-");
    }
}
