//! Letta's memory patches (`memory_apply_patch`): a simplified unified diff anchored on the
//! text, not on line numbers, for one block, or a multi-block patch whose `*** ` headers add,
//! delete, update and rename blocks.
//!
//! ```
//! use memgpt_core::memory::patch::{PatchOp, apply_hunks, parse};
//!
//! let ops = parse("*** Update Block: human\n-Likes: tea\n+Likes: coffee").unwrap();
//! let PatchOp::Update { label, diff } = &ops[0] else { unreachable!() };
//! assert_eq!(label, "human");
//! assert_eq!(apply_hunks("Name: Ann\nLikes: tea", diff).unwrap(), "Name: Ann\nLikes: coffee");
//! ```

/// One operation of a patch, in the order written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchOp {
    /// `*** Add Block: <label>`: a new block with this text (the `+` lines) and description.
    Add {
        /// The new block's label.
        label: String,
        /// Its description (`Description: ...` on the line after the header), if any.
        description: Option<String>,
        /// Its text.
        text: String,
    },
    /// `*** Delete Block: <label>`.
    Delete {
        /// The block.
        label: String,
    },
    /// `*** Update Block: <label>` (or a patch without headers, for the block named beside
    /// it): the diff applied with [`apply_hunks`].
    Update {
        /// The block.
        label: String,
        /// The diff's lines.
        diff: String,
    },
    /// `*** Move to: <label>`: renames the block the previous header named.
    Rename {
        /// The block's label before.
        from: String,
        /// Its label after.
        to: String,
    },
}

/// Why a patch was refused; written for the model to read and correct.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// A header without its label.
    #[error("`{header}` must name a block: `{header} <label>`")]
    MissingLabel {
        /// The header.
        header: &'static str,
    },
    /// `*** Move to:` before any block header.
    #[error("`*** Move to:` must follow an Add, Update or Delete Block header")]
    MoveWithoutBlock,
    /// A patch with neither headers nor a label.
    #[error(
        "the patch has no `*** Add/Delete/Update Block:` header, so it needs the label of the block it edits"
    )]
    NoLabel,
    /// Nothing to apply.
    #[error(
        "the patch holds no change: give lines starting with ' ' (context), '-' (remove) or '+' (add)"
    )]
    Empty,
    /// The patch shows display line numbers (`12→`), which are not part of the text.
    #[error(
        "the patch holds a line-number prefix such as `12→`: line numbers are for display only, give the text alone"
    )]
    LineNumbers,
    /// A hunk's context and removed lines are not in the block.
    #[error(
        "a hunk's context was not found in the block; check the lines exist as written and give more context. \
         It starts:\n{start}"
    )]
    NotFound {
        /// The first lines the hunk expected.
        start: String,
    },
    /// A hunk's context occurs more than once.
    #[error(
        "a hunk's context occurs {occurrences} times in the block: add surrounding lines so it occurs once"
    )]
    Ambiguous {
        /// How many times it occurs.
        occurrences: usize,
    },
}

/// Whether `text` holds a display line-number prefix (`12→` at the start of a line), which
/// the model copied from a view and must not write into memory.
pub fn has_line_number_prefix(text: &str) -> bool {
    text.lines().any(|line| {
        // A diff line's marker comes first (`-12→ old`).
        let line = line.strip_prefix(['-', '+']).unwrap_or(line);
        let rest = line.trim_start();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with('→')
    })
}

/// The operations of `patch`: its `*** ` headers, or, without any, one update of the block
/// `label` names (`None` or empty: an error).
pub fn parse_for(patch: &str, label: Option<&str>) -> Result<Vec<PatchOp>, PatchError> {
    if has_line_number_prefix(patch) {
        return Err(PatchError::LineNumbers);
    }
    if is_multi_block(patch) {
        return parse(patch);
    }
    match label.map(str::trim).filter(|l| !l.is_empty()) {
        Some(label) => Ok(vec![PatchOp::Update {
            label: label.to_owned(),
            diff: patch.to_owned(),
        }]),
        None => Err(PatchError::NoLabel),
    }
}

/// Whether `patch` uses the multi-block headers.
pub fn is_multi_block(patch: &str) -> bool {
    patch.lines().any(|line| {
        ["Add Block:", "Delete Block:", "Update Block:", "Move to:"]
            .iter()
            .any(|h| line.strip_prefix("*** ").is_some_and(|r| r.starts_with(h)))
    })
}

/// The operations of a multi-block patch, in order.
pub fn parse(patch: &str) -> Result<Vec<PatchOp>, PatchError> {
    let mut ops = Vec::new();
    let mut last_label: Option<String> = None;
    let mut lines = patch.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("*** Add Block:") {
            let label = header_label(rest, "*** Add Block:")?;
            let description = lines
                .next_if(|l| l.starts_with("Description:"))
                .map(|l| l["Description:".len()..].trim().to_owned());
            let mut text = Vec::new();
            while let Some(body) = lines.next_if(|l| !l.starts_with("*** ")) {
                if let Some(added) = body.strip_prefix('+') {
                    text.push(added);
                } else if body.trim().is_empty() {
                    text.push("");
                }
            }
            let text = text.join("\n").trim_end_matches('\n').to_owned();
            last_label = Some(label.clone());
            ops.push(PatchOp::Add {
                label,
                description,
                text,
            });
        } else if let Some(rest) = line.strip_prefix("*** Delete Block:") {
            let label = header_label(rest, "*** Delete Block:")?;
            last_label = Some(label.clone());
            ops.push(PatchOp::Delete { label });
        } else if let Some(rest) = line.strip_prefix("*** Update Block:") {
            let label = header_label(rest, "*** Update Block:")?;
            let mut diff = Vec::new();
            while let Some(body) = lines.next_if(|l| !l.starts_with("*** ")) {
                diff.push(body);
            }
            last_label = Some(label.clone());
            ops.push(PatchOp::Update {
                label,
                diff: diff.join("\n"),
            });
        } else if let Some(rest) = line.strip_prefix("*** Move to:") {
            let to = header_label(rest, "*** Move to:")?;
            let from = last_label
                .replace(to.clone())
                .ok_or(PatchError::MoveWithoutBlock)?;
            ops.push(PatchOp::Rename { from, to });
        }
        // Anything else outside a block (`*** Begin Patch`, `@@`) is ignored.
    }
    if ops.is_empty() {
        return Err(PatchError::Empty);
    }
    Ok(ops)
}

fn header_label(rest: &str, header: &'static str) -> Result<String, PatchError> {
    let label = rest.trim();
    if label.is_empty() {
        return Err(PatchError::MissingLabel { header });
    }
    Ok(label.to_owned())
}

/// `text` with `diff`'s hunks applied in turn: each hunk's context and `-` lines must occur
/// exactly once in the text as it stands, and are replaced by its context and `+` lines; a
/// hunk of `+` lines alone appends them. `@@` lines separate hunks; `---`/`+++` headers are
/// ignored; tabs count as spaces.
pub fn apply_hunks(text: &str, diff: &str) -> Result<String, PatchError> {
    let text = expand_tabs(text);
    let diff = expand_tabs(diff);
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let hunks = hunks(&diff);
    if hunks.is_empty() {
        return Err(PatchError::Empty);
    }
    for hunk in hunks {
        let mut expected = Vec::new();
        let mut replacement = Vec::new();
        for line in &hunk {
            match line.split_at(1) {
                (" ", rest) => {
                    expected.push(rest.to_owned());
                    replacement.push(rest.to_owned());
                }
                ("-", rest) => expected.push(rest.to_owned()),
                (_, rest) => replacement.push(rest.to_owned()),
            }
        }
        if expected.is_empty() {
            if lines.len() == 1 && lines[0].is_empty() {
                lines = replacement;
            } else {
                lines.extend(replacement);
            }
            continue;
        }
        let found = occurrences(&lines, &expected);
        match found.as_slice() {
            [at] => {
                lines.splice(*at..*at + expected.len(), replacement);
            }
            [] => {
                return Err(PatchError::NotFound {
                    start: expected
                        .iter()
                        .take(4)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("\n"),
                });
            }
            many => {
                return Err(PatchError::Ambiguous {
                    occurrences: many.len(),
                });
            }
        }
    }
    Ok(lines.join("\n"))
}

/// Where `needle` starts in `hay`, overlaps included, in time linear in both (Knuth-Morris-
/// Pratt over lines): the model writes both the block and the patch, and a naive scan of
/// hundreds of thousands of equal lines would take minutes.
fn occurrences(hay: &[String], needle: &[String]) -> Vec<usize> {
    // fallback[i]: the length of the longest proper prefix of needle[..=i] that is also its suffix.
    let mut fallback = vec![0; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = fallback[k - 1];
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        fallback[i] = k;
    }
    let mut found = Vec::new();
    let mut k = 0;
    for (i, line) in hay.iter().enumerate() {
        while k > 0 && *line != needle[k] {
            k = fallback[k - 1];
        }
        if *line == needle[k] {
            k += 1;
        }
        if k == needle.len() {
            found.push(i + 1 - k);
            k = fallback[k - 1];
        }
    }
    found
}

/// The hunks of a diff: runs of ` `, `-` and `+` lines between `@@` lines (a blank line is
/// an empty context line).
fn hunks(diff: &str) -> Vec<Vec<String>> {
    let mut hunks = Vec::new();
    let mut hunk = Vec::new();
    for line in diff.lines() {
        if line.starts_with("*** ") || line.starts_with("---") || line.starts_with("+++") {
            continue;
        }
        if line.starts_with("@@") {
            if !hunk.is_empty() {
                hunks.push(std::mem::take(&mut hunk));
            }
        } else if line.starts_with([' ', '-', '+']) {
            hunk.push(line.to_owned());
        } else if line.trim().is_empty() {
            hunk.push(" ".to_owned());
        }
    }
    if !hunk.is_empty() {
        hunks.push(hunk);
    }
    hunks
}

/// Tabs as spaces, to the next multiple of eight (as Python's `expandtabs`), so a patch
/// written with either matches.
fn expand_tabs(text: &str) -> String {
    if !text.contains('\t') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut column = 0;
    for c in text.chars() {
        match c {
            '\t' => {
                let n = 8 - column % 8;
                out.extend(std::iter::repeat_n(' ', n));
                column += n;
            }
            '\n' | '\r' => {
                out.push(c);
                column = 0;
            }
            c => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hunk_is_anchored_on_its_context() {
        let text = "a\nb\nc\nb";
        assert_eq!(apply_hunks(text, " a\n-b\n+B").unwrap(), "a\nB\nc\nb");
        assert_eq!(
            apply_hunks(text, "-b\n+B"),
            Err(PatchError::Ambiguous { occurrences: 2 })
        );
        assert!(matches!(
            apply_hunks(text, "-zzz\n+y"),
            Err(PatchError::NotFound { .. })
        ));
        // Hunks apply in turn; `@@` separates them; headers are ignored.
        assert_eq!(
            apply_hunks(text, "--- a\n+++ b\n@@ -1 @@\n-a\n+A\n@@\n c\n-b\n+d").unwrap(),
            "A\nb\nc\nd"
        );
        // Only additions: appended (an empty block takes them as its text).
        assert_eq!(apply_hunks(text, "+e").unwrap(), "a\nb\nc\nb\ne");
        assert_eq!(apply_hunks("", "+first").unwrap(), "first");
        assert_eq!(apply_hunks(text, "@@"), Err(PatchError::Empty));
    }

    #[test]
    fn occurrences_are_found_in_linear_time_overlaps_included() {
        let lines = |text: &str| text.split('\n').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(occurrences(&lines("a\na\na"), &lines("a\na")), vec![0, 1]);
        assert_eq!(
            occurrences(&lines("a\nb\na\nb\nc"), &lines("a\nb\nc")),
            vec![2]
        );
        assert!(occurrences(&lines("a"), &lines("a\nb")).is_empty());
        // 200,000 equal lines and a hunk of 100,000 of them plus one that differs: a naive
        // scan compares about 10^10 lines (minutes); this one about 4 * 10^5.
        let block = vec!["same".to_owned(); 200_000].join("\n");
        let mut hunk = vec!["-same"; 100_000];
        hunk.push("-other");
        hunk.push("+x");
        assert!(matches!(
            apply_hunks(&block, &hunk.join("\n")),
            Err(PatchError::NotFound { .. })
        ));
    }

    #[test]
    fn tabs_match_spaces() {
        assert_eq!(apply_hunks("\tx", "-        x\n+y").unwrap(), "y");
    }

    #[test]
    fn multi_block_patches_parse_in_order() {
        let patch = "*** Begin Patch\n*** Add Block: notes\nDescription: Loose notes.\n+one\n\n+two\n\
                     *** Update Block: human\n@@\n-old\n+new\n*** Move to: person\n*** Delete Block: scratch\n*** End Patch";
        assert_eq!(
            parse_for(patch, Some("")).unwrap(),
            vec![
                PatchOp::Add {
                    label: "notes".into(),
                    description: Some("Loose notes.".into()),
                    text: "one\n\ntwo".into()
                },
                PatchOp::Update {
                    label: "human".into(),
                    diff: "@@\n-old\n+new".into()
                },
                PatchOp::Rename {
                    from: "human".into(),
                    to: "person".into()
                },
                PatchOp::Delete {
                    label: "scratch".into()
                },
            ]
        );
        assert_eq!(parse("*** Move to: x"), Err(PatchError::MoveWithoutBlock));
        assert_eq!(
            parse("*** Delete Block:  "),
            Err(PatchError::MissingLabel {
                header: "*** Delete Block:"
            })
        );
    }

    #[test]
    fn a_plain_diff_needs_its_label_and_no_line_numbers() {
        assert_eq!(parse_for("-a\n+b", None), Err(PatchError::NoLabel));
        assert_eq!(
            parse_for("-a\n+b", Some("human")).unwrap(),
            vec![PatchOp::Update {
                label: "human".into(),
                diff: "-a\n+b".into()
            }]
        );
        assert_eq!(
            parse_for("-12→ a\n+b", Some("human")),
            Err(PatchError::LineNumbers)
        );
        assert!(!has_line_number_prefix("version 2 → 3"));
    }
}
