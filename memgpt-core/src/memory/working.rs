//! [`WorkingContext`]: the agent's memory blocks, edited under their limits.

use serde::{Deserialize, Serialize};

use super::{MemoryBlock, MemoryError, Skill, Skills, check_label};
use crate::ids::BlockId;

/// The labelled blocks of working context, in display order, and the agent's skills (listed,
/// and loaded where the model loaded them).
///
/// Every successful edit bumps [`WorkingContext::revision`], which the agent uses to notice that
/// the rendered system prompt (and its token count) must be refreshed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkingContext {
    blocks: Vec<MemoryBlock>,
    #[serde(default, skip_serializing_if = "Skills::is_empty")]
    skills: Skills,
    #[serde(skip)]
    revision: u64,
}

impl WorkingContext {
    /// An empty working context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Working context holding `blocks` (labels must be unique).
    pub fn from_blocks(blocks: impl IntoIterator<Item = MemoryBlock>) -> Result<Self, MemoryError> {
        let mut ctx = Self::new();
        for block in blocks {
            ctx.add(block)?;
        }
        Ok(ctx)
    }

    /// Adds a block at the end.
    pub fn add(&mut self, block: MemoryBlock) -> Result<(), MemoryError> {
        if self.get(block.label()).is_some() {
            return Err(MemoryError::DuplicateLabel {
                label: block.label().to_owned(),
            });
        }
        self.blocks.push(block);
        self.revision += 1;
        Ok(())
    }

    /// Removes a block, returning it.
    pub fn remove(&mut self, label: &str) -> Result<MemoryBlock, MemoryError> {
        let index = self.index_of(label)?;
        self.revision += 1;
        Ok(self.blocks.remove(index))
    }

    /// Renames the agent's own block `from` to `to`, where it stands (a shared block is
    /// refused with [`MemoryError::Shared`]: its label is every holder's).
    pub fn rename(&mut self, from: &str, to: &str) -> Result<&MemoryBlock, MemoryError> {
        let index = self.own_index(from)?;
        check_label(to)?;
        if from != to && self.get(to).is_some() {
            return Err(MemoryError::DuplicateLabel {
                label: to.to_owned(),
            });
        }
        if self.blocks[index].is_read_only() {
            return Err(MemoryError::ReadOnly {
                label: from.to_owned(),
            });
        }
        self.blocks[index].set_label(to.to_owned());
        self.revision += 1;
        Ok(&self.blocks[index])
    }

    /// The skills.
    pub fn skills(&self) -> &Skills {
        &self.skills
    }

    /// Adds a skill (a name already taken is refused).
    pub fn add_skill(&mut self, skill: Skill) -> Result<(), MemoryError> {
        self.skills.add(skill)?;
        self.revision += 1;
        Ok(())
    }

    /// Removes a skill, returning it.
    pub fn remove_skill(&mut self, name: &str) -> Result<Skill, MemoryError> {
        let skill = self.skills.remove(name)?;
        self.revision += 1;
        Ok(skill)
    }

    /// Loads `file` of skill `name` (its main file for `None`) into context; returns the
    /// path loaded. Loading a loaded file changes nothing.
    pub fn load_skill(&mut self, name: &str, file: Option<&str>) -> Result<String, MemoryError> {
        let skill = self.skills.get_mut(name)?;
        let path = match file {
            Some(path) => path.to_owned(),
            None => skill.main_file().unwrap_or(super::SKILL_FILE).to_owned(),
        };
        if !skill.files.contains_key(&path) {
            return Err(MemoryError::UnknownSkillFile {
                name: name.to_owned(),
                file: path,
                files: skill.files.keys().cloned().collect(),
            });
        }
        if !skill.loaded.contains(&path) {
            skill.loaded.push(path.clone());
            self.revision += 1;
        }
        Ok(path)
    }

    /// Unloads `file` of skill `name` (all its files for `None`); returns the paths unloaded.
    pub fn unload_skill(
        &mut self,
        name: &str,
        file: Option<&str>,
    ) -> Result<Vec<String>, MemoryError> {
        let skill = self.skills.get_mut(name)?;
        let unloaded: Vec<String> = match file {
            None => std::mem::take(&mut skill.loaded),
            Some(path) => {
                let before = skill.loaded.len();
                skill.loaded.retain(|p| p != path);
                if skill.loaded.len() == before {
                    Vec::new()
                } else {
                    vec![path.to_owned()]
                }
            }
        };
        if !unloaded.is_empty() {
            self.revision += 1;
        }
        Ok(unloaded)
    }

    /// Characters working context holds now: the blocks' text plus the skills as rendered.
    pub fn chars(&self) -> usize {
        self.blocks.iter().map(MemoryBlock::chars).sum::<usize>() + self.skills.rendered_chars()
    }

    /// Characters working context may come to hold: every block at its character limit (or
    /// its text, if longer) plus the skills as rendered; what loading an agent checks against
    /// its window (the model's own changes are counted on [`WorkingContext::chars`]).
    pub fn chars_at_limits(&self) -> usize {
        self.blocks
            .iter()
            .map(MemoryBlock::chars_at_limit)
            .sum::<usize>()
            + self.skills.rendered_chars()
    }

    /// The blocks, in order.
    pub fn blocks(&self) -> &[MemoryBlock] {
        &self.blocks
    }

    /// The block labelled `label`.
    pub fn get(&self, label: &str) -> Option<&MemoryBlock> {
        self.blocks.iter().find(|b| b.label() == label)
    }

    /// Puts `copy`, an agent's copy of a shared block (see
    /// [`SharedBlock::attached`](crate::store::SharedBlock::attached)), in place of the agent's
    /// own block of the same label, where it stands in the prompt.
    pub(crate) fn replace_with_shared(&mut self, copy: MemoryBlock) -> Result<(), MemoryError> {
        let index = self.own_index(copy.label())?;
        self.blocks[index] = copy;
        self.revision += 1;
        Ok(())
    }

    /// The ids of the shared blocks, in order.
    pub fn shared_ids(&self) -> Vec<BlockId> {
        self.blocks
            .iter()
            .filter_map(|b| b.shared().map(|s| s.id))
            .collect()
    }

    /// Whether any block is shared.
    pub fn has_shared(&self) -> bool {
        self.blocks.iter().any(|b| b.shared().is_some())
    }

    /// Puts `current`, a shared block as stored (the copy
    /// [`SharedBlock::attached`](crate::store::SharedBlock::attached) gives), in place of this
    /// agent's copy of it; returns whether the copy was behind (it then changes, and the
    /// revision moves).
    pub(crate) fn refresh_shared(&mut self, current: MemoryBlock) -> bool {
        let Some(id) = current.shared().map(|s| s.id) else {
            return false;
        };
        let Some(copy) = self
            .blocks
            .iter_mut()
            .find(|b| b.shared().is_some_and(|s| s.id == id))
        else {
            return false;
        };
        if *copy == current {
            return false;
        }
        *copy = current;
        self.revision += 1;
        true
    }

    /// The block labelled `label`, or the error naming the labels there are.
    pub fn block(&self, label: &str) -> Result<&MemoryBlock, MemoryError> {
        self.index_of(label).map(|index| &self.blocks[index])
    }

    /// Applies `edit` to the agent's own block `label` (all of it or nothing: the edit works on
    /// a copy) and returns the block as edited; a shared block is refused with
    /// [`MemoryError::Shared`].
    pub fn edit_own(
        &mut self,
        label: &str,
        edit: impl FnOnce(&mut MemoryBlock) -> Result<(), MemoryError>,
    ) -> Result<&MemoryBlock, MemoryError> {
        let index = self.own_index(label)?;
        let mut block = self.blocks[index].clone();
        edit(&mut block)?;
        self.blocks[index] = block;
        self.revision += 1;
        Ok(&self.blocks[index])
    }

    /// Appends `content` to block `label`.
    pub fn append(&mut self, label: &str, content: &str) -> Result<(), MemoryError> {
        let index = self.own_index(label)?;
        self.blocks[index].append(content)?;
        self.revision += 1;
        Ok(())
    }

    /// Replaces `old` with `new` in block `label`; returns the number of replacements.
    pub fn replace(&mut self, label: &str, old: &str, new: &str) -> Result<usize, MemoryError> {
        let index = self.own_index(label)?;
        let n = self.blocks[index].replace(old, new)?;
        self.revision += 1;
        Ok(n)
    }

    /// Sets the whole text of block `label`.
    pub fn set(&mut self, label: &str, value: impl Into<String>) -> Result<(), MemoryError> {
        let index = self.own_index(label)?;
        self.blocks[index].set(value.into())?;
        self.revision += 1;
        Ok(())
    }

    /// A counter bumped by every successful change.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Renders every block for the prompt, then the skills (see [`Skills::render`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (i, block) in self.blocks.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            block.render(&mut out);
        }
        if !self.skills.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&self.skills.render());
        }
        out
    }

    /// The index of block `label` if it is the agent's own: a shared block is edited where it
    /// lives, in the block store.
    fn own_index(&self, label: &str) -> Result<usize, MemoryError> {
        let index = self.index_of(label)?;
        if self.blocks[index].shared().is_some() {
            return Err(MemoryError::Shared {
                label: label.to_owned(),
            });
        }
        Ok(index)
    }

    fn index_of(&self, label: &str) -> Result<usize, MemoryError> {
        self.blocks
            .iter()
            .position(|b| b.label() == label)
            .ok_or_else(|| MemoryError::UnknownBlock {
                label: label.to_owned(),
                available: self.blocks.iter().map(|b| b.label().to_owned()).collect(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> WorkingContext {
        WorkingContext::from_blocks([
            MemoryBlock::new("persona", "I am Sam."),
            MemoryBlock::new("human", ""),
        ])
        .unwrap()
    }

    #[test]
    fn unknown_labels_list_the_real_ones() {
        let mut c = ctx();
        let err = c.append("user", "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "there is no memory block labelled `user`; the blocks are: persona, human"
        );
    }

    #[test]
    fn revision_moves_only_on_success() {
        let mut c = ctx();
        let r = c.revision();
        c.append("human", "Name: Chad").unwrap();
        assert_eq!(c.revision(), r + 1);
        assert!(c.replace("human", "nope", "x").is_err());
        assert_eq!(c.revision(), r + 1);
    }

    #[test]
    fn duplicate_labels_are_rejected() {
        let mut c = ctx();
        assert!(matches!(
            c.add(MemoryBlock::new("human", "")),
            Err(MemoryError::DuplicateLabel { .. })
        ));
    }

    #[test]
    fn render_joins_blocks() {
        let rendered = ctx().render();
        assert!(rendered.starts_with("<persona characters=\"9/2000\">"));
        assert!(rendered.ends_with("<human characters=\"0/2000\">\n\n</human>"));
    }
}
