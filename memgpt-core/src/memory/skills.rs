//! Skills: procedural memory. A [`Skill`] is a folder of instructions (`SKILL.md`, whose front
//! matter gives its `name` and `description`) and resources, as Letta's agent files and
//! Anthropic's Agent Skills write them. Every skill's name and description are listed in
//! working context; the model loads a skill's files into context when a task needs them
//! (the `skill` function) and unloads them when done, so many skills cost little until used.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::MemoryError;

/// The file holding a skill's instructions and front matter.
pub const SKILL_FILE: &str = "SKILL.md";

/// The most characters of one skill's description shown in the listing (longer ones are cut;
/// `skill` with `list` shows them whole).
pub const LISTED_DESCRIPTION_CHARS: usize = 200;

/// The most characters the listing of skills takes in working context; skills beyond it are
/// counted, and `skill` with `list` pages through all of them. 46 skills then cost about 1,000
/// tokens, not the 2,500 their descriptions would.
pub const LISTING_CHARS: usize = 4_000;

/// One skill, as an agent keeps it.
///
/// ```
/// use memgpt_core::memory::Skill;
///
/// let skill = Skill::from_files(
///     "pdf",
///     [("SKILL.md".to_owned(), "---\nname: pdf\ndescription: Fill PDF forms.\n---\nUse pdftk.".to_owned())].into(),
///     None,
/// );
/// assert_eq!(skill.description, "Fill PDF forms.");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    /// Its name, unique among the agent's skills.
    pub name: String,
    /// What it is for and when to use it (from `SKILL.md`'s front matter).
    #[serde(default)]
    pub description: String,
    /// Its files by path (`SKILL.md`, `scripts/x.sh`, ...). Empty for a skill known only by
    /// its [`Skill::source_url`].
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Where the skill comes from (`letta-ai/skills/main/tools/x`, `anthropic:pdf`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
    /// The files loaded into context, in the order loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded: Vec<String>,
}

impl Skill {
    /// A skill holding `files`; its description is read from `SKILL.md`'s front matter.
    pub fn from_files(
        name: impl Into<String>,
        files: BTreeMap<String, String>,
        source_url: Option<String>,
    ) -> Self {
        let description = files
            .get(SKILL_FILE)
            .and_then(|text| front_matter(text, "description"))
            .unwrap_or_default();
        Self {
            name: name.into(),
            description,
            files,
            source_url,
            loaded: Vec::new(),
        }
    }

    /// Characters of the files loaded into context.
    pub fn loaded_chars(&self) -> usize {
        self.loaded
            .iter()
            .filter_map(|path| self.files.get(path))
            .map(|text| text.chars().count())
            .sum()
    }

    /// The file to load when none is named: `SKILL.md`, or the first file.
    pub fn main_file(&self) -> Option<&str> {
        if self.files.contains_key(SKILL_FILE) {
            Some(SKILL_FILE)
        } else {
            self.files.keys().next().map(String::as_str)
        }
    }

    /// One line of the listing: name, and the description cut to `max_chars`.
    fn listing_line(&self, max_chars: usize) -> String {
        let mut line = format!("- {}", self.name);
        let description = self
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !description.is_empty() {
            line.push_str(": ");
            match description.char_indices().nth(max_chars) {
                Some((cut, _)) => {
                    line.push_str(&description[..cut]);
                    line.push_str("...");
                }
                None => line.push_str(&description),
            }
        }
        if self.files.is_empty() {
            line.push_str(" (files not included");
            if let Some(url) = &self.source_url {
                let _ = write!(line, "; source {url}");
            }
            line.push(')');
        }
        line
    }
}

/// The value of `key` in `text`'s YAML front matter (`---` lines around `key: value`), with
/// quotes taken off; `None` without front matter or the key.
pub fn front_matter(text: &str, key: &str) -> Option<String> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "---" {
        return None;
    }
    let mut found: Option<String> = None;
    for line in lines {
        if line.trim() == "---" {
            break;
        }
        if let Some(value) = found.as_mut() {
            // A folded value continues on indented lines.
            if line.starts_with([' ', '\t']) && !line.trim().is_empty() {
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(line.trim());
                continue;
            }
            break;
        }
        if let Some(rest) = line.strip_prefix(key).and_then(|r| r.strip_prefix(':')) {
            let value = rest.trim();
            let value = match value {
                ">" | "|" | ">-" | "|-" => "",
                v => v.trim_matches(|c| c == '"' || c == '\''),
            };
            found = Some(value.to_owned());
        }
    }
    found.filter(|v| !v.is_empty())
}

/// An agent's skills: the listing and the loaded files, rendered into working context.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Skills(Vec<Skill>);

impl Skills {
    /// The skills, in order.
    pub fn all(&self) -> &[Skill] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The skill named `name`, or the error naming the skills there are.
    pub fn get(&self, name: &str) -> Result<&Skill, MemoryError> {
        self.0
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| self.unknown(name))
    }

    pub(super) fn get_mut(&mut self, name: &str) -> Result<&mut Skill, MemoryError> {
        let unknown = self.unknown(name);
        self.0.iter_mut().find(|s| s.name == name).ok_or(unknown)
    }

    fn unknown(&self, name: &str) -> MemoryError {
        MemoryError::UnknownSkill {
            name: name.to_owned(),
            available: self.0.iter().map(|s| s.name.clone()).collect(),
        }
    }

    /// Adds a skill at the end (a name already taken is refused).
    pub(super) fn add(&mut self, skill: Skill) -> Result<(), MemoryError> {
        if self.0.iter().any(|s| s.name == skill.name) {
            return Err(MemoryError::DuplicateSkill { name: skill.name });
        }
        self.0.push(skill);
        Ok(())
    }

    /// Removes a skill, returning it.
    pub(super) fn remove(&mut self, name: &str) -> Result<Skill, MemoryError> {
        let index = self
            .0
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| self.unknown(name))?;
        Ok(self.0.remove(index))
    }

    /// Renders the listing and the loaded files; empty without skills.
    pub fn render(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "<skills>\nSkills you can load into context with the `skill` function when a task needs \
             one (name: what it is for):",
        );
        let mut used = 0;
        let mut shown = 0;
        for skill in &self.0 {
            let line = skill.listing_line(LISTED_DESCRIPTION_CHARS);
            if used + line.len() > LISTING_CHARS {
                break;
            }
            used += line.len();
            shown += 1;
            out.push('\n');
            out.push_str(&line);
        }
        if shown < self.0.len() {
            let _ = write!(
                out,
                "\n... and {} more: call `skill` with command \"list\" to see them all.",
                self.0.len() - shown
            );
        }
        out.push_str("\n</skills>");
        for skill in &self.0 {
            for path in &skill.loaded {
                if let Some(text) = skill.files.get(path) {
                    let _ = write!(
                        out,
                        "\n<loaded_skill name=\"{}\" file=\"{}\">\n{}\n</loaded_skill>",
                        skill.name, path, text
                    );
                }
            }
        }
        out
    }

    /// Characters of [`Skills::render`].
    pub fn rendered_chars(&self) -> usize {
        self.render().chars().count()
    }

    /// One page of the whole listing (descriptions whole), for `skill` with `list`.
    pub fn listing_page(&self, page: usize, per_page: usize) -> String {
        if self.0.is_empty() {
            return "You have no skills.".to_owned();
        }
        let pages = self.0.len().div_ceil(per_page.max(1));
        let start = page * per_page;
        if start >= self.0.len() {
            return format!(
                "Page {page} is past the end: the skills fill pages 0-{}.",
                pages - 1
            );
        }
        let mut out = format!("Skills (page {page} of 0-{}):", pages - 1);
        for skill in self.0.iter().skip(start).take(per_page) {
            out.push('\n');
            out.push_str(&skill.listing_line(usize::MAX));
            if !skill.loaded.is_empty() {
                let _ = write!(out, " [loaded: {}]", skill.loaded.join(", "));
            }
        }
        if page + 1 < pages {
            let _ = write!(out, "\nMore: call again with page={}.", page + 1);
        }
        out
    }
}

impl FromIterator<Skill> for Skills {
    fn from_iter<I: IntoIterator<Item = Skill>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, description: &str) -> Skill {
        let text = format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\nSteps.");
        Skill::from_files(name, [(SKILL_FILE.to_owned(), text)].into(), None)
    }

    #[test]
    fn front_matter_values_are_read() {
        let text =
            "---\nname: x\ndescription: >\n  Folded over\n  two lines\nlicense: MIT\n---\nbody";
        assert_eq!(
            front_matter(text, "description").as_deref(),
            Some("Folded over two lines")
        );
        assert_eq!(front_matter(text, "name").as_deref(), Some("x"));
        assert_eq!(front_matter("no front matter", "name"), None);
        assert_eq!(
            front_matter("---\nname: \"q\"\n---", "name").as_deref(),
            Some("q")
        );
    }

    #[test]
    fn the_listing_is_bounded_and_says_what_it_left_out() {
        let many: Skills = (0..100)
            .map(|i| skill(&format!("skill-{i}"), &"does a thing ".repeat(30)))
            .collect();
        let rendered = many.render();
        assert!(rendered.len() < LISTING_CHARS + 400, "{}", rendered.len());
        assert!(rendered.contains("more: call `skill` with command \"list\""));
        assert!(many.listing_page(0, 20).contains("skill-19"));
        assert!(many.listing_page(4, 20).contains("skill-99"));
        assert!(many.listing_page(5, 20).contains("past the end"));
        assert_eq!(Skills::default().render(), "");
    }

    #[test]
    fn loaded_files_are_rendered_after_the_listing() {
        let mut skills: Skills = [skill("pdf", "Fill forms.")].into_iter().collect();
        skills
            .get_mut("pdf")
            .unwrap()
            .loaded
            .push(SKILL_FILE.into());
        let rendered = skills.render();
        assert!(rendered.contains("- pdf: Fill forms.\n</skills>"));
        assert!(rendered.ends_with("Steps.\n</loaded_skill>"), "{rendered}");
        assert_eq!(
            skills.get("pdf").unwrap().loaded_chars(),
            skills.get("pdf").unwrap().files[SKILL_FILE].chars().count()
        );
        assert!(matches!(
            skills.get("nope"),
            Err(MemoryError::UnknownSkill { .. })
        ));
    }
}
