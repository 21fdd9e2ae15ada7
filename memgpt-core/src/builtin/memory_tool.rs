//! `memory` and `memory_apply_patch`: Letta's memory tools, with Letta's names and arguments,
//! with which the model creates, edits, renames, describes and deletes its own memory blocks
//! (paths `/memories/<label>`). Offered when an agent lists them (agents imported from
//! Letta's `letta_v1_agent` files do).

use std::fmt::Write;

use schemars::JsonSchema;
use serde::Deserialize;

use super::core_memory::{block_usage, replace_once};
use crate::function::{FunctionContext, FunctionError};
use crate::memgpt_fn;
use crate::memory::patch::{self, PatchOp, has_line_number_prefix};
use crate::memory::{DEFAULT_BLOCK_LIMIT, MemoryBlock, MemoryError};

/// What `memory` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum MemoryCommand {
    /// List the memory blocks, or show one block's lines (`path`, optional `view_range`).
    View,
    /// Create a block (`path`, `description`, optional `file_text`).
    Create,
    /// Replace text that occurs once in a block (`path`, `old_string`, `new_string`).
    StrReplace,
    /// Insert lines after line `insert_line` of a block (`path`, `insert_text`).
    Insert,
    /// Delete a block (`path`).
    Delete,
    /// Rename a block (`old_path`, `new_path`), or set its description (`path`, `description`).
    Rename,
}

/// Memory management tool with sub-commands for memory block operations (paths are
/// /memories/<label>): "view" lists the blocks or shows one with line numbers; "create" adds a
/// block with a description and optional starting text; "str_replace" replaces text that occurs
/// exactly once; "insert" inserts text after a line (0: first, -1: at the end); "delete" removes
/// a block; "rename" renames one (old_path, new_path) or, with path and description, updates
/// its description. Never include the line numbers of a view in text you write.
#[memgpt_fn]
#[allow(clippy::too_many_arguments)]
async fn memory(
    ctx: &mut FunctionContext<'_>,
    /// The sub-command: view, create, str_replace, insert, delete or rename.
    command: MemoryCommand,
    /// Path of the memory block, /memories/<label> (view, create, str_replace, insert, delete;
    /// rename with description).
    path: Option<String>,
    /// The starting text of a new block (create).
    file_text: Option<String>,
    /// The block's description (create; rename with path).
    description: Option<String>,
    /// The exact text to replace; it must occur once (str_replace).
    #[serde(alias = "old_str")]
    old_string: Option<String>,
    /// The replacement text (str_replace).
    #[serde(alias = "new_str")]
    new_string: Option<String>,
    /// The line after which to insert: 0 puts the text first, -1 (the default) at the end
    /// (insert).
    insert_line: Option<i64>,
    /// The text to insert (insert).
    insert_text: Option<String>,
    /// First and last line to show, from 1; -1 as the last means to the end (view).
    view_range: Option<Vec<i64>>,
    /// The block's current path (rename).
    old_path: Option<String>,
    /// The block's new path (rename).
    new_path: Option<String>,
) -> Result<String, FunctionError> {
    let need = |value: Option<String>, name: &str| {
        value.ok_or_else(|| {
            FunctionError::new(format!("`{name}` is required for the {command:?} command"))
        })
    };
    match command {
        MemoryCommand::View => match path.as_deref().map(label_of).filter(|l| !l.is_empty()) {
            None => Ok(list_blocks(ctx)),
            Some(label) => {
                let label = resolve(ctx, &label);
                view_block(ctx.memory().block(&label)?, view_range.as_deref())
            }
        },
        MemoryCommand::Create => {
            let label = label_of(&need(path, "path")?);
            let description = need(description, "description")?;
            let text = file_text.unwrap_or_default();
            refuse_line_numbers(&text, "file_text")?;
            let block = new_block(&label, text, Some(description));
            let block = ctx.create_block(block)?;
            Ok(format!(
                "Created memory block /memories/{label}; it is in your memory now. {}",
                block_usage(block)
            ))
        }
        MemoryCommand::StrReplace => {
            let label = resolve(ctx, &label_of(&need(path, "path")?));
            let old = need(old_string, "old_string")?;
            let new = need(new_string, "new_string")?;
            refuse_line_numbers(&old, "old_string")?;
            refuse_line_numbers(&new, "new_string")?;
            let block = ctx
                .edit_block(&label, |b| replace_once(b, &old, &new))
                .await?;
            Ok(format!("Replaced. {}", block_usage(block)))
        }
        MemoryCommand::Insert => {
            let label = resolve(ctx, &label_of(&need(path, "path")?));
            let text = need(insert_text, "insert_text")?;
            refuse_line_numbers(&text, "insert_text")?;
            let at = insert_line.unwrap_or(-1);
            let block = ctx
                .edit_block(&label, |b| insert_lines(b, at, &text))
                .await?;
            Ok(format!("Inserted. {}", block_usage(block)))
        }
        MemoryCommand::Delete => {
            let label = resolve(ctx, &label_of(&need(path, "path")?));
            let block = ctx.delete_block(&label)?;
            let how = if block.shared().is_some() {
                " (it was shared: you no longer hold it; the other agents keep it)"
            } else {
                ""
            };
            Ok(format!(
                "Deleted memory block /memories/{label}{how}; it is no longer in your memory."
            ))
        }
        MemoryCommand::Rename => match (path, description, old_path, new_path) {
            (_, _, Some(old), Some(new)) => {
                let from = resolve(ctx, &label_of(&old));
                let to = label_of(&new);
                ctx.rename_block(&from, &to)?;
                Ok(format!(
                    "Renamed memory block /memories/{from} to /memories/{to}."
                ))
            }
            (Some(path), Some(description), _, _) => {
                let label = resolve(ctx, &label_of(&path));
                let description = Some(description).filter(|d| !d.trim().is_empty());
                ctx.describe_block(&label, description.as_deref()).await?;
                Ok(format!(
                    "Updated the description of memory block /memories/{label}."
                ))
            }
            _ => Err(FunctionError::new(
                "rename needs old_path and new_path (to rename a block), or path and description (to \
                 update its description)",
            )),
        },
    }
}

/// Applies a simplified unified-diff patch to memory blocks. Without "***" headers the patch
/// edits the block named by label: lines starting with " " are context, "-" are removed, "+"
/// are added, "@@" separates hunks; each hunk's context must occur once. With headers (label
/// ""), several blocks at once: "*** Add Block: <label>" (optional next line "Description:
/// <text>", then "+" lines as its text), "*** Delete Block: <label>", "*** Update Block:
/// <label>" (then a diff), "*** Move to: <new label>" (renames the block named just before).
/// Do not include line numbers. All operations apply, or none.
#[memgpt_fn]
async fn memory_apply_patch(
    ctx: &mut FunctionContext<'_>,
    /// The block to patch when the patch has no "***" headers; "" with headers.
    label: String,
    /// The patch.
    patch: String,
) -> Result<String, FunctionError> {
    let ops = patch::parse_for(&patch, Some(&label)).map_err(MemoryError::from)?;
    // All or nothing: working context as it was, and the shared blocks already written (they
    // stand in the block store, so the copies must show them).
    let before = ctx.memory().clone();
    let mut written_shared = Vec::new();
    let mut done = Vec::new();
    for op in &ops {
        if let Err(e) = apply(ctx, op, &mut written_shared).await {
            *ctx.memory_mut() = before;
            if !written_shared.is_empty() {
                ctx.refresh_shared_blocks().await?;
            }
            let mut message = format!("patch refused at `{}`: {e}", describe(op));
            if written_shared.is_empty() {
                message.push_str(" Nothing was changed.");
            } else {
                let _ = write!(
                    message,
                    " Nothing was changed, except the shared blocks {} already written (other agents \
                     may have read them).",
                    written_shared.join(", ")
                );
            }
            return Err(FunctionError::new(message));
        }
        done.push(describe(op));
    }
    Ok(format!(
        "Applied the patch; your memory shows it now:\n- {}",
        done.join("\n- ")
    ))
}

async fn apply(
    ctx: &mut FunctionContext<'_>,
    op: &PatchOp,
    written_shared: &mut Vec<String>,
) -> Result<(), FunctionError> {
    match op {
        PatchOp::Add {
            label,
            description,
            text,
        } => {
            if ctx.memory().get(label).is_some() {
                return Err(MemoryError::DuplicateLabel {
                    label: label.clone(),
                }
                .into());
            }
            let description = description.clone().filter(|d| !d.is_empty());
            ctx.create_block(new_block(label, text.clone(), description))?;
        }
        PatchOp::Delete { label } => {
            ctx.delete_block(label)?;
        }
        PatchOp::Update { label, diff } => {
            let shared = ctx.memory().block(label)?.shared().is_some();
            ctx.edit_block(label, |b| {
                let text = patch::apply_hunks(b.value(), diff)?;
                b.set(text)
            })
            .await?;
            if shared {
                written_shared.push(label.clone());
            }
        }
        PatchOp::Rename { from, to } => {
            ctx.rename_block(from, to)?;
        }
    }
    Ok(())
}

fn describe(op: &PatchOp) -> String {
    match op {
        PatchOp::Add { label, .. } => format!("created block {label}"),
        PatchOp::Delete { label } => format!("deleted block {label}"),
        PatchOp::Update { label, .. } => format!("updated block {label}"),
        PatchOp::Rename { from, to } => format!("renamed block {from} to {to}"),
    }
}

/// What `skill` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum SkillCommand {
    /// Load a skill's file (its SKILL.md unless `file` names another) into your memory.
    Load,
    /// Unload a skill's files (or only `file`) from your memory.
    Unload,
    /// List every skill with its whole description.
    List,
}

/// Loads a skill into your memory when a task needs it (its SKILL.md instructions; other files
/// of the skill with file), unloads it when you are done, or lists all your skills with their
/// whole descriptions. Loaded skills take room in your context: unload what you no longer need.
#[memgpt_fn]
async fn skill(
    ctx: &mut FunctionContext<'_>,
    /// load, unload or list.
    command: SkillCommand,
    /// The skill (load, unload).
    name: Option<String>,
    /// One of the skill's files, e.g. "references/api.md" (load: default SKILL.md; unload:
    /// default all).
    file: Option<String>,
    /// Page of the list, from 0 (list).
    page: Option<u32>,
) -> Result<String, FunctionError> {
    const PER_PAGE: usize = 20;
    let name = || {
        name.clone()
            .ok_or_else(|| FunctionError::new("`name` is required: which skill?"))
    };
    match command {
        SkillCommand::List => Ok(ctx
            .memory()
            .skills()
            .listing_page(page.unwrap_or(0) as usize, PER_PAGE)),
        SkillCommand::Load => {
            let name = name()?;
            let path = ctx.load_skill(&name, file.as_deref())?;
            let skill = ctx.memory().skills().get(&name)?;
            let chars = skill.files.get(&path).map_or(0, |t| t.chars().count());
            let mut out =
                format!("Loaded {path} of skill `{name}` ({chars} characters) into your memory.");
            let others: Vec<&str> = skill
                .files
                .keys()
                .filter(|p| !skill.loaded.contains(p))
                .map(String::as_str)
                .collect();
            if !others.is_empty() {
                let _ = write!(
                    out,
                    " Its other files: {} (load one with file when the instructions call for it).",
                    others.join(", ")
                );
            }
            Ok(out)
        }
        SkillCommand::Unload => {
            let name = name()?;
            let unloaded = ctx.unload_skill(&name, file.as_deref())?;
            Ok(if unloaded.is_empty() {
                format!("Nothing of skill `{name}` was loaded.")
            } else {
                format!("Unloaded {} of skill `{name}`.", unloaded.join(", "))
            })
        }
    }
}

/// The label of a Letta memory path: `/memories/<label>` (or `<label>`).
fn label_of(path: &str) -> String {
    let path = path.trim();
    let rest = path
        .strip_prefix("/memories")
        .map_or(path, |rest| rest.strip_prefix('/').unwrap_or(rest));
    rest.trim_start_matches('/')
        .trim_end_matches('/')
        .to_owned()
}

/// The label a path's label means here: itself if a block has it, otherwise with `/` as `_`
/// (Letta maps some paths that way), otherwise itself (the error then lists the blocks).
fn resolve(ctx: &FunctionContext<'_>, label: &str) -> String {
    if ctx.memory().get(label).is_none() {
        let flat = label.replace('/', "_");
        if ctx.memory().get(&flat).is_some() {
            return flat;
        }
    }
    label.to_owned()
}

/// A new block of the model's: the default limit, or its text's length if longer.
fn new_block(label: &str, text: String, description: Option<String>) -> MemoryBlock {
    let limit = DEFAULT_BLOCK_LIMIT.max(text.chars().count());
    let block = MemoryBlock::new(label, text).with_limit(limit);
    match description {
        Some(description) => block.with_description(description),
        None => block,
    }
}

fn refuse_line_numbers(text: &str, field: &str) -> Result<(), FunctionError> {
    if has_line_number_prefix(text) {
        return Err(FunctionError::new(format!(
            "{field} holds a line-number prefix such as `12→`: line numbers are for display only, give the \
             text alone"
        )));
    }
    Ok(())
}

/// Inserts `text` after line `at` (0: first; -1: at the end); a line past the end is refused.
fn insert_lines(block: &mut MemoryBlock, at: i64, text: &str) -> Result<(), MemoryError> {
    let mut lines: Vec<&str> = if block.value().is_empty() {
        Vec::new()
    } else {
        block.value().split('\n').collect()
    };
    let index = match at {
        -1 => lines.len(),
        n if n >= 0 && (n as usize) <= lines.len() => n as usize,
        _ => {
            return Err(MemoryError::InvalidLine {
                label: block.label().to_owned(),
                line: at,
                lines: lines.len(),
            });
        }
    };
    lines.insert(index, text);
    block.set(lines.join("\n"))
}

/// Every block: path, use, description, flags.
fn list_blocks(ctx: &FunctionContext<'_>) -> String {
    let blocks = ctx.memory().blocks();
    if blocks.is_empty() {
        return "You have no memory blocks.".to_owned();
    }
    let mut out = String::from("Memory blocks:");
    for block in blocks {
        let _ = write!(
            out,
            "\n- /memories/{} ({}/{} characters)",
            block.label(),
            block.chars(),
            block.limit()
        );
        if let Some(description) = block.description() {
            let _ = write!(out, ": {description}");
        }
        if block.is_read_only() {
            out.push_str(" [read-only]");
        }
        if block.shared().is_some() {
            out.push_str(" [shared with other agents]");
        }
    }
    out
}

/// A block's lines, numbered from 1 (`view_range`: first and last, -1 for the end).
fn view_block(block: &MemoryBlock, range: Option<&[i64]>) -> Result<String, FunctionError> {
    let lines: Vec<&str> = block.value().split('\n').collect();
    let (first, last) = match range {
        None => (1, lines.len()),
        Some([first, last]) if *first >= 1 && (*last == -1 || last >= first) => {
            let last = if *last == -1 {
                lines.len()
            } else {
                (*last as usize).min(lines.len())
            };
            (*first as usize, last)
        }
        Some(_) => {
            return Err(FunctionError::new(
                "view_range must be [first, last]: lines from 1, last >= first or -1 for the end",
            ));
        }
    };
    let mut out = format!(
        "/memories/{} ({}/{} characters; line numbers are for display only):",
        block.label(),
        block.chars(),
        block.limit()
    );
    for (n, line) in lines.iter().enumerate().take(last).skip(first - 1) {
        let _ = write!(out, "\n{:>6}→{line}", n + 1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_labels() {
        assert_eq!(label_of("/memories/human"), "human");
        assert_eq!(label_of("/memories/system/human/work"), "system/human/work");
        assert_eq!(label_of("human"), "human");
        assert_eq!(label_of("/memories"), "");
        assert_eq!(label_of("/memories/"), "");
    }

    #[test]
    fn insert_counts_lines_as_letta_does() {
        let mut b = MemoryBlock::new("n", "a\nb");
        insert_lines(&mut b, 0, "first").unwrap();
        insert_lines(&mut b, -1, "last").unwrap();
        insert_lines(&mut b, 2, "mid").unwrap();
        assert_eq!(b.value(), "first\na\nmid\nb\nlast");
        assert!(matches!(
            insert_lines(&mut b, 9, "x"),
            Err(MemoryError::InvalidLine { lines: 5, .. })
        ));
        let mut empty = MemoryBlock::new("e", "");
        insert_lines(&mut empty, -1, "only").unwrap();
        assert_eq!(empty.value(), "only");
    }

    #[test]
    fn views_number_lines_and_honour_ranges() {
        let b = MemoryBlock::new("n", "a\nb\nc");
        let all = view_block(&b, None).unwrap();
        assert!(all.ends_with("     1→a\n     2→b\n     3→c"), "{all}");
        let two = view_block(&b, Some(&[2, -1])).unwrap();
        assert!(
            two.ends_with("     2→b\n     3→c") && !two.contains("1→"),
            "{two}"
        );
        assert!(view_block(&b, Some(&[0, 1])).is_err());
        assert!(has_line_number_prefix(&two));
    }

    #[test]
    fn str_replace_needs_one_occurrence() {
        let mut b = MemoryBlock::new("n", "x x");
        assert!(matches!(
            replace_once(&mut b, "x", "y"),
            Err(MemoryError::Ambiguous { occurrences: 2, .. })
        ));
        replace_once(&mut b, "x x", "y").unwrap();
        assert_eq!(b.value(), "y");
    }
}
