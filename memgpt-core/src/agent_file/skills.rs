//! Skills in agent files: Letta's file-level `skills` to the agents' [`Skill`]s and back.

use std::collections::BTreeMap;

use super::schema::{AgentExtras, AgentFile, SkillSchema};
use crate::memory::{SKILL_FILE, Skill};

/// The skills the file gives its agent `index` (with `extras`, memgpt's record of which it
/// held and had loaded), and a note for each one changed or left out.
pub(super) fn skills_of(
    file: &AgentFile,
    index: usize,
    extras: Option<&AgentExtras>,
    adjusted: &mut Vec<String>,
    unmapped: &mut Vec<String>,
) -> Vec<Skill> {
    let names = extras.and_then(|x| x.skills.as_ref());
    if names.is_none() && index > 0 {
        // Letta's skills belong to the file's first agent (the group's manager).
        return Vec::new();
    }
    let mut skills: Vec<Skill> = Vec::new();
    for schema in &file.skills {
        if names.is_some_and(|names| !names.contains(&schema.name)) {
            continue;
        }
        let name = schema.name.trim();
        if name.is_empty() {
            unmapped.push("a skill without a name".to_owned());
            continue;
        }
        if skills.iter().any(|s| s.name == name) {
            unmapped.push(format!("skill `{name}`: a second skill of that name"));
            continue;
        }
        let files = schema.files.clone().unwrap_or_default();
        if files.is_empty() {
            let source = schema
                .source_url
                .as_deref()
                .map_or(String::new(), |url| format!(" (source {url})"));
            adjusted.push(format!(
                "skill `{name}`: the file holds no files of it{source}: listed, but it cannot be loaded \
                 until its files are added"
            ));
        } else if !files.contains_key(SKILL_FILE) {
            adjusted.push(format!(
                "skill `{name}`: no {SKILL_FILE}, so no description; its first file is loaded in its place"
            ));
        }
        let mut skill = Skill::from_files(name, files, schema.source_url.clone());
        if let Some(loaded) = extras.and_then(|x| x.loaded_skills.get(name)) {
            skill.loaded = loaded
                .iter()
                .filter(|path| skill.files.contains_key(*path))
                .cloned()
                .collect();
        }
        skills.push(skill);
    }
    skills
}

/// Letta's schema of `skill` (files `None` for a skill known by its source only).
pub(super) fn schema_of(skill: &Skill) -> SkillSchema {
    SkillSchema {
        name: skill.name.clone(),
        files: (!skill.files.is_empty()).then(|| skill.files.clone()),
        source_url: skill.source_url.clone(),
    }
}

/// The loaded files of `skills`, by skill (what [`AgentExtras::loaded_skills`] records).
pub(super) fn loaded_of<'a>(
    skills: impl IntoIterator<Item = &'a Skill>,
) -> BTreeMap<String, Vec<String>> {
    skills
        .into_iter()
        .filter(|s| !s.loaded.is_empty())
        .map(|s| (s.name.clone(), s.loaded.clone()))
        .collect()
}
