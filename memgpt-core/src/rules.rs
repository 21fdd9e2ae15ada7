//! Tool rules: which functions the model may call, and when (Letta's tool rules).
//!
//! Rules are part of an agent's configuration ([`AgentConfig::tool_rules`](crate::AgentConfig::tool_rules)).
//! The agent loop enforces them two ways:
//!
//! * **By construction**: each LLM call is offered only the functions the rules allow at that
//!   point, so a provider that constrains decoding to the offered schemas (the local model's
//!   grammar, `tool_choice`) cannot produce a forbidden call.
//! * **In the loop**: a forbidden call that arrives anyway is not run; the model reads why, with
//!   a heartbeat, and tries again.
//!
//! ```
//! use memgpt_core::rules::ToolRule;
//!
//! let rules = vec![
//!     // Look things up first, answer last, and at most three searches a step.
//!     ToolRule::RunFirst { tool: "archival_memory_search".into() },
//!     ToolRule::Terminal { tool: "send_message".into() },
//!     ToolRule::MaxCalls { tool: "archival_memory_search".into(), max: 3 },
//! ];
//! # let _ = rules;
//! ```

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One rule about the functions an agent's model may call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolRule {
    /// The first call of every step must be `tool` (with several, one of them).
    RunFirst {
        /// The function.
        tool: String,
    },
    /// Calling `tool` ends the step: nothing runs after it, whatever heartbeat it asked for.
    Terminal {
        /// The function.
        tool: String,
    },
    /// After `tool` the step always continues (as if it had asked for a heartbeat).
    Continue {
        /// The function.
        tool: String,
    },
    /// After `tool`, only `children` may be called next. With `by_output`, `tool`'s result
    /// chooses: a result equal to a key (trimmed) allows that key's functions instead.
    Children {
        /// The function.
        tool: String,
        /// What may follow it.
        children: Vec<String>,
        /// What may follow it, by its result.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        by_output: BTreeMap<String, Vec<String>>,
    },
    /// `tool` may be called at most `max` times in one step.
    MaxCalls {
        /// The function.
        tool: String,
        /// The most calls per step.
        max: usize,
    },
    /// The step may not end before `tool` has been called in it.
    RequiredBeforeExit {
        /// The function.
        tool: String,
    },
    /// A call of `tool` waits for a person: the step pauses with the call pending
    /// ([`StopReason::AwaitingApproval`](crate::StopReason::AwaitingApproval)) and goes on with
    /// an [`Event::approve`](crate::Event::approve) or [`Event::deny`](crate::Event::deny) of
    /// that call; a denial reaches the model as the call's (failed) result.
    RequiresApproval {
        /// The function.
        tool: String,
    },
}

impl ToolRule {
    /// The function the rule is about.
    pub fn tool(&self) -> &str {
        match self {
            ToolRule::RunFirst { tool }
            | ToolRule::Terminal { tool }
            | ToolRule::Continue { tool }
            | ToolRule::Children { tool, .. }
            | ToolRule::MaxCalls { tool, .. }
            | ToolRule::RequiredBeforeExit { tool }
            | ToolRule::RequiresApproval { tool } => tool,
        }
    }

    /// Every function the rule names.
    pub fn names(&self) -> Vec<&str> {
        let mut names = vec![self.tool()];
        if let ToolRule::Children {
            children,
            by_output,
            ..
        } = self
        {
            names.extend(children.iter().map(String::as_str));
            names.extend(by_output.values().flatten().map(String::as_str));
        }
        names
    }
}

impl ToolRule {
    /// The rule as Letta writes it in agent files (`{"type": "exit_loop", "tool_name": ...}`).
    /// A `Children` rule with `by_output` becomes Letta's `conditional`, which maps each output
    /// to one function (the first of ours) with the first child as its default.
    pub fn to_letta(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            ToolRule::RunFirst { tool } => json!({"type": "run_first", "tool_name": tool}),
            ToolRule::Terminal { tool } => json!({"type": "exit_loop", "tool_name": tool}),
            ToolRule::Continue { tool } => json!({"type": "continue_loop", "tool_name": tool}),
            ToolRule::Children {
                tool,
                children,
                by_output,
            } if by_output.is_empty() => {
                json!({"type": "constrain_child_tools", "tool_name": tool, "children": children})
            }
            ToolRule::Children {
                tool,
                children,
                by_output,
            } => {
                let mapping: BTreeMap<&str, &str> = by_output
                    .iter()
                    .filter_map(|(output, next)| Some((output.as_str(), next.first()?.as_str())))
                    .collect();
                json!({
                    "type": "conditional",
                    "tool_name": tool,
                    "default_child": children.first(),
                    "child_output_mapping": mapping,
                    "require_output_mapping": false,
                })
            }
            ToolRule::MaxCalls { tool, max } => {
                json!({"type": "max_count_per_step", "tool_name": tool, "max_count_limit": max})
            }
            ToolRule::RequiredBeforeExit { tool } => {
                json!({"type": "required_before_exit", "tool_name": tool})
            }
            ToolRule::RequiresApproval { tool } => {
                json!({"type": "requires_approval", "tool_name": tool})
            }
        }
    }

    /// A rule from Letta's agent-file form, its function names passed through `rename`
    /// (Letta's names for memgpt's functions). Kinds memgpt does not enforce (such as
    /// `parent_last_tool`) and malformed rules are an `Err` saying so.
    pub fn from_letta(
        value: &serde_json::Value,
        rename: impl Fn(&str) -> String,
    ) -> Result<Self, String> {
        let kind = value["type"].as_str().unwrap_or_default();
        let tool = value["tool_name"]
            .as_str()
            .map(&rename)
            .ok_or_else(|| format!("a `{kind}` rule without a `tool_name`"))?;
        let names = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .map(|a| a.iter().filter_map(|n| n.as_str()).map(&rename).collect())
                .unwrap_or_default()
        };
        Ok(match kind {
            "run_first" => ToolRule::RunFirst { tool },
            "exit_loop" => ToolRule::Terminal { tool },
            "continue_loop" => ToolRule::Continue { tool },
            "constrain_child_tools" => ToolRule::Children {
                tool,
                children: names(&value["children"]),
                by_output: BTreeMap::new(),
            },
            "conditional" => {
                let by_output: BTreeMap<String, Vec<String>> = value["child_output_mapping"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter_map(|(output, child)| {
                                Some((output.clone(), vec![rename(child.as_str()?)]))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let mut children: Vec<String> = value["default_child"]
                    .as_str()
                    .map(&rename)
                    .into_iter()
                    .collect();
                if children.is_empty() {
                    // No default: any mapped function may follow an unmapped output.
                    children = by_output.values().flatten().cloned().collect();
                    children.dedup();
                }
                ToolRule::Children {
                    tool,
                    children,
                    by_output,
                }
            }
            "max_count_per_step" => ToolRule::MaxCalls {
                tool,
                max: value["max_count_limit"]
                    .as_u64()
                    .and_then(|m| usize::try_from(m).ok())
                    .ok_or_else(|| {
                        "a `max_count_per_step` rule without a `max_count_limit`".to_owned()
                    })?,
            },
            "required_before_exit" => ToolRule::RequiredBeforeExit { tool },
            "requires_approval" => ToolRule::RequiresApproval { tool },
            other => {
                return Err(format!(
                    "`{other}` rules (on `{tool}`) are not enforced by memgpt"
                ));
            }
        })
    }
}

/// Checks that every function `rules` name is one of `functions`: a rule about a function the
/// agent does not have is a configuration mistake, reported by name.
pub fn check_rules<'a>(
    rules: &[ToolRule],
    functions: impl IntoIterator<Item = &'a str> + Clone,
) -> Result<(), String> {
    for rule in rules {
        for name in rule.names() {
            if !functions.clone().into_iter().any(|f| f == name) {
                return Err(format!(
                    "a tool rule names `{name}`, which is not one of the agent's functions"
                ));
            }
        }
    }
    Ok(())
}

/// What the rules say about one step so far: the calls made and the last one's result.
#[derive(Debug, Default)]
pub(crate) struct StepRules<'a> {
    rules: &'a [ToolRule],
    calls: HashMap<String, usize>,
    last: Option<(String, String)>,
}

/// Where a step stands under its rules (calls so far, the last call and its result), kept
/// while the step waits for an approval so it goes on under the same rules.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesProgress {
    /// Calls per function so far in the step.
    pub calls: BTreeMap<String, usize>,
    /// The last call and its result.
    pub last: Option<(String, String)>,
}

impl<'a> StepRules<'a> {
    /// A step under `rules`, before any call.
    pub(crate) fn new(rules: &'a [ToolRule]) -> Self {
        Self {
            rules,
            calls: HashMap::new(),
            last: None,
        }
    }

    /// A step under `rules` that had made progress before it paused.
    pub(crate) fn resume(rules: &'a [ToolRule], progress: RulesProgress) -> Self {
        Self {
            rules,
            calls: progress.calls.into_iter().collect(),
            last: progress.last,
        }
    }

    /// Where the step stands.
    pub(crate) fn progress(&self) -> RulesProgress {
        RulesProgress {
            calls: self.calls.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            last: self.last.clone(),
        }
    }

    /// Whether a call of `name` waits for a person's approval.
    pub(crate) fn requires_approval(&self, name: &str) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r, ToolRule::RequiresApproval { tool } if tool == name))
    }

    /// Whether any rule applies.
    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Which of `functions` may be called next; every one when nothing constrains the call.
    pub(crate) fn allowed<'f>(&self, functions: impl IntoIterator<Item = &'f str>) -> Vec<&'f str> {
        functions
            .into_iter()
            .filter(|name| self.forbidden(name).is_none())
            .collect()
    }

    /// Why `name` may not be called next, if it may not.
    pub(crate) fn forbidden(&self, name: &str) -> Option<String> {
        let first: Vec<&str> = self
            .rules
            .iter()
            .filter_map(|r| match r {
                ToolRule::RunFirst { tool } => Some(tool.as_str()),
                _ => None,
            })
            .collect();
        if self.last.is_none() && !first.is_empty() && !first.contains(&name) {
            return Some(format!("the first call of a step must be {}", list(&first)));
        }
        if let Some((previous, output)) = &self.last {
            for rule in self.rules {
                if let ToolRule::Children {
                    tool,
                    children,
                    by_output,
                } = rule
                    && tool == previous
                {
                    let next = by_output.get(output.trim()).unwrap_or(children);
                    if !next.iter().any(|c| c == name) {
                        let next: Vec<&str> = next.iter().map(String::as_str).collect();
                        return Some(format!(
                            "after `{previous}` only {} may be called",
                            list(&next)
                        ));
                    }
                }
            }
        }
        for rule in self.rules {
            if let ToolRule::MaxCalls { tool, max } = rule
                && tool == name
                && self.calls.get(name).copied().unwrap_or(0) >= *max
            {
                return Some(format!(
                    "`{name}` may be called at most {max} time{} per step",
                    if *max == 1 { "" } else { "s" }
                ));
            }
        }
        None
    }

    /// Records a call of `name` that returned `output`.
    pub(crate) fn called(&mut self, name: &str, output: &str) {
        *self.calls.entry(name.to_owned()).or_default() += 1;
        self.last = Some((name.to_owned(), output.to_owned()));
    }

    /// Whether calling `name` ends the step.
    pub(crate) fn is_terminal(&self, name: &str) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r, ToolRule::Terminal { tool } if tool == name))
    }

    /// Whether the step must continue after `name`.
    pub(crate) fn continues(&self, name: &str) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r, ToolRule::Continue { tool } if tool == name))
    }

    /// The functions the step must still call before it may end.
    pub(crate) fn missing_before_exit(&self) -> Vec<&'a str> {
        self.rules
            .iter()
            .filter_map(|r| match r {
                ToolRule::RequiredBeforeExit { tool } if !self.calls.contains_key(tool) => {
                    Some(tool.as_str())
                }
                _ => None,
            })
            .collect()
    }
}

/// `a`, `a` or `b`, `a`, `b` or `c`.
pub(crate) fn list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.as_slice() {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [&str; 4] = ["search", "answer", "note", "lookup"];

    fn tool(name: &str) -> String {
        name.to_owned()
    }

    #[test]
    fn run_first_then_children_by_output_then_max_calls() {
        let rules = vec![
            ToolRule::RunFirst {
                tool: tool("search"),
            },
            ToolRule::Children {
                tool: tool("search"),
                children: vec![tool("answer")],
                by_output: BTreeMap::from([(tool("nothing found"), vec![tool("lookup")])]),
            },
            ToolRule::MaxCalls {
                tool: tool("search"),
                max: 1,
            },
        ];
        let mut step = StepRules::new(&rules);
        assert_eq!(step.allowed(ALL), ["search"]);
        assert!(step.forbidden("answer").unwrap().contains("first call"));
        step.called("search", "3 results");
        assert_eq!(step.allowed(ALL), ["answer"]);
        let mut other = StepRules::new(&rules);
        other.called("search", " nothing found ");
        assert_eq!(other.allowed(ALL), ["lookup"]);
        other.called("lookup", "x");
        // No child rule for `lookup`; `search` has used its one call.
        assert_eq!(other.allowed(ALL), ["answer", "note", "lookup"]);
        assert!(
            other
                .forbidden("search")
                .unwrap()
                .contains("at most 1 time")
        );
    }

    #[test]
    fn terminal_continue_and_required_before_exit() {
        let rules = vec![
            ToolRule::Terminal {
                tool: tool("answer"),
            },
            ToolRule::Continue { tool: tool("note") },
            ToolRule::RequiredBeforeExit { tool: tool("note") },
        ];
        let mut step = StepRules::new(&rules);
        assert!(step.is_terminal("answer") && !step.is_terminal("note"));
        assert!(step.continues("note") && !step.continues("answer"));
        assert_eq!(step.missing_before_exit(), ["note"]);
        step.called("note", "ok");
        assert!(step.missing_before_exit().is_empty());
        assert_eq!(step.allowed(ALL), ALL);
    }

    mod in_the_loop {
        use std::sync::Arc;

        use serde_json::json;

        use super::tool;
        use crate::message::MessageKind;
        use crate::rules::ToolRule;
        use crate::testing::ScriptedProvider;
        use crate::{Agent, StopReason};

        async fn agent(llm: &Arc<ScriptedProvider>, rules: Vec<ToolRule>) -> Agent {
            Agent::builder()
                .provider(llm.clone())
                .tool_rules(rules)
                .build()
                .await
                .unwrap()
        }

        fn offered(request: &crate::llm::ChatRequest) -> Vec<String> {
            request.tools.iter().map(|t| t.name.clone()).collect()
        }

        #[tokio::test]
        async fn a_forbidden_call_is_not_offered_and_refused_if_made_anyway() {
            let llm = Arc::new(ScriptedProvider::new());
            let mut agent = agent(
                &llm,
                vec![
                    ToolRule::RunFirst {
                        tool: tool("conversation_search"),
                    },
                    ToolRule::Children {
                        tool: tool("conversation_search"),
                        children: vec![tool("send_message")],
                        by_output: Default::default(),
                    },
                ],
            )
            .await;
            // The model ignores what it is offered and answers at once.
            llm.push_call("send_message", json!({"message": "Hi!"}));
            llm.push_call(
                "conversation_search",
                json!({"query": "cats", "request_heartbeat": true}),
            );
            llm.push_call("send_message", json!({"message": "No cats yet."}));
            let step = agent.step("Did I mention cats?").await.unwrap();
            assert_eq!(step.stop_reason, StopReason::EndTurn);
            assert_eq!(step.replies, ["No cats yet."]);
            let calls: Vec<(&str, bool)> = step
                .function_calls
                .iter()
                .map(|c| (c.name.as_str(), c.ok))
                .collect();
            assert_eq!(
                calls,
                [
                    ("send_message", false),
                    ("conversation_search", true),
                    ("send_message", true)
                ]
            );
            assert!(
                step.function_calls[0]
                    .output
                    .contains("first call of a step must be")
            );
            // The refusal is a result the model reads, with a heartbeat.
            assert!(
                step.messages
                    .iter()
                    .any(|m| m.kind == MessageKind::FunctionError)
            );
            let requests = llm.agent_requests();
            assert_eq!(offered(&requests[0]), ["conversation_search"]);
            assert_eq!(offered(&requests[1]), ["conversation_search"]);
            assert_eq!(offered(&requests[2]), ["send_message"]);
        }

        #[tokio::test]
        async fn terminal_continue_max_calls_and_required_before_exit() {
            let llm = Arc::new(ScriptedProvider::new());
            let mut agent = agent(
                &llm,
                vec![
                    ToolRule::Terminal {
                        tool: tool("core_memory_append"),
                    },
                    ToolRule::Continue {
                        tool: tool("archival_memory_insert"),
                    },
                    ToolRule::MaxCalls {
                        tool: tool("conversation_search"),
                        max: 1,
                    },
                    ToolRule::RequiredBeforeExit {
                        tool: tool("archival_memory_insert"),
                    },
                ],
            )
            .await;
            // `send_message` would end the step, but the required insert has not run.
            llm.push_call("send_message", json!({"message": "Done?"}));
            // Continue: no heartbeat asked, the step goes on anyway.
            llm.push_call(
                "archival_memory_insert",
                json!({"content": "likes tea", "request_heartbeat": false}),
            );
            llm.push_call(
                "conversation_search",
                json!({"query": "tea", "request_heartbeat": true}),
            );
            llm.push_call(
                "conversation_search",
                json!({"query": "tea", "request_heartbeat": true}),
            );
            // Terminal: asks for a heartbeat, gets none; the next call in the response is not run.
            llm.push_calls(
                "",
                &[
                    ("core_memory_append", json!({"label": "human", "content": "Likes tea.", "request_heartbeat": true})),
                    ("send_message", json!({"message": "never"})),
                ],
            );
            let step = agent.step("I like tea.").await.unwrap();
            assert_eq!(step.stop_reason, StopReason::EndTurn, "{step:?}");
            let calls: Vec<(&str, bool)> = step
                .function_calls
                .iter()
                .map(|c| (c.name.as_str(), c.ok))
                .collect();
            assert_eq!(
                calls,
                [
                    ("send_message", true),
                    ("archival_memory_insert", true),
                    ("conversation_search", true),
                    ("conversation_search", false),
                    ("core_memory_append", true),
                    ("send_message", false),
                ]
            );
            assert!(step.function_calls[3].output.contains("at most 1 time"));
            assert!(
                step.function_calls[5]
                    .output
                    .contains("the step ended with `core_memory_append`")
            );
            let heartbeat = step
                .messages
                .iter()
                .find(|m| m.kind == MessageKind::Heartbeat)
                .unwrap();
            assert!(
                heartbeat
                    .text
                    .contains("call `archival_memory_insert` first"),
                "{}",
                heartbeat.text
            );
            assert_eq!(llm.remaining(), 0);
            assert!(
                agent
                    .memory()
                    .get("human")
                    .unwrap()
                    .value()
                    .contains("Likes tea.")
            );
            // Once `conversation_search` was used up it was no longer offered.
            let requests = llm.agent_requests();
            assert!(!offered(&requests[4]).contains(&"conversation_search".to_owned()));
        }

        #[tokio::test]
        async fn rules_travel_in_agent_files_in_lettas_form() {
            use crate::agent_file::{ImportOptions, export, import};

            let llm = Arc::new(ScriptedProvider::new());
            let storage = crate::store::Storage::in_memory();
            let rules = vec![
                ToolRule::RunFirst {
                    tool: tool("conversation_search"),
                },
                ToolRule::MaxCalls {
                    tool: tool("conversation_search"),
                    max: 2,
                },
            ];
            let agent = Agent::builder()
                .provider(llm)
                .storage(storage.clone())
                .name("ruled")
                .tool_rules(rules.clone())
                .build()
                .await
                .unwrap();
            let mut file = export(&storage, agent.id()).await.unwrap();
            assert_eq!(file.agents[0].tool_rules[0]["type"], "run_first");
            // With memgpt's extras, and as a plain Letta file (Letta's form only), plus a kind
            // memgpt does not enforce.
            let options = |name: &str| ImportOptions {
                name: Some(name.into()),
                ..ImportOptions::default()
            };
            let copy = import(&storage, &file, options("copy")).await.unwrap();
            file.memgpt = None;
            file.agents[0]
                .tool_rules
                .push(json!({"type": "parent_last_tool", "tool_name": "send_message"}));
            file.agents[0]
                .tool_rules
                .push(json!({"type": "exit_loop", "tool_name": "web_search"}));
            let letta = import(&storage, &file, options("letta")).await.unwrap();
            for id in [copy.id, letta.id] {
                let state = storage.agents.load_agent(id).await.unwrap().unwrap();
                assert_eq!(state.config.tool_rules, rules);
            }
            let notes = letta.unmapped.join("\n");
            assert!(notes.contains("`parent_last_tool` rules"), "{notes}");
            assert!(notes.contains("`web_search`"), "{notes}");
        }

        #[tokio::test]
        async fn rules_persist_and_must_name_the_agents_functions() {
            let llm = Arc::new(ScriptedProvider::new());
            let storage = crate::store::Storage::in_memory();
            let rule = ToolRule::Terminal {
                tool: tool("send_message"),
            };
            let agent = Agent::builder()
                .provider(llm.clone())
                .storage(storage.clone())
                .tool_rule(rule.clone())
                .build()
                .await
                .unwrap();
            let loaded = Agent::builder()
                .provider(llm.clone())
                .storage(storage.clone())
                .load(agent.id())
                .await
                .unwrap();
            assert_eq!(loaded.config().tool_rules, [rule]);
            let error = Agent::builder()
                .provider(llm)
                .tool_rule(ToolRule::RunFirst {
                    tool: tool("web_search"),
                })
                .build()
                .await
                .unwrap_err();
            assert!(error.to_string().contains("`web_search`"), "{error}");
        }
    }

    #[test]
    fn rules_must_name_the_agents_functions_and_round_trip_as_json() {
        let rule = ToolRule::Children {
            tool: tool("search"),
            children: vec![tool("answer"), tool("missing")],
            by_output: BTreeMap::new(),
        };
        let error = check_rules(std::slice::from_ref(&rule), ALL).unwrap_err();
        assert!(error.contains("`missing`"), "{error}");
        assert!(
            check_rules(
                &[ToolRule::Terminal {
                    tool: tool("answer")
                }],
                ALL
            )
            .is_ok()
        );
        let json = serde_json::to_value(&rule).unwrap();
        assert_eq!(json["type"], "children");
        assert!(json.get("by_output").is_none());
        assert_eq!(serde_json::from_value::<ToolRule>(json).unwrap(), rule);
        assert_eq!(list(&["a", "b", "c"]), "`a`, `b` or `c`");
    }

    #[test]
    fn rules_travel_in_lettas_form() {
        let rules = vec![
            ToolRule::RunFirst {
                tool: tool("search"),
            },
            ToolRule::Terminal {
                tool: tool("answer"),
            },
            ToolRule::Continue { tool: tool("note") },
            ToolRule::Children {
                tool: tool("search"),
                children: vec![tool("answer"), tool("note")],
                by_output: BTreeMap::new(),
            },
            ToolRule::Children {
                tool: tool("lookup"),
                children: vec![tool("answer")],
                by_output: BTreeMap::from([(tool("none"), vec![tool("search")])]),
            },
            ToolRule::MaxCalls {
                tool: tool("search"),
                max: 2,
            },
            ToolRule::RequiredBeforeExit { tool: tool("note") },
        ];
        for rule in &rules {
            let letta = rule.to_letta();
            assert_eq!(
                &ToolRule::from_letta(&letta, str::to_owned).unwrap(),
                rule,
                "{letta}"
            );
        }
        assert_eq!(rules[1].to_letta()["type"], "exit_loop");
        let renamed = ToolRule::from_letta(
            &serde_json::json!({"type": "exit_loop", "tool_name": "memory_insert"}),
            |n| {
                if n == "memory_insert" {
                    "core_memory_append".into()
                } else {
                    n.to_owned()
                }
            },
        );
        assert_eq!(
            renamed,
            Ok(ToolRule::Terminal {
                tool: tool("core_memory_append")
            })
        );
        let approval = serde_json::json!({"type": "requires_approval", "tool_name": "x"});
        let rule = ToolRule::from_letta(&approval, str::to_owned).unwrap();
        assert_eq!(rule, ToolRule::RequiresApproval { tool: tool("x") });
        assert_eq!(rule.to_letta(), approval);
        let parent = serde_json::json!({"type": "parent_last_tool", "tool_name": "x"});
        assert!(
            ToolRule::from_letta(&parent, str::to_owned)
                .unwrap_err()
                .contains("not enforced")
        );
    }
}
