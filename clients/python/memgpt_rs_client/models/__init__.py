"""Contains all the data models used in inputs/outputs"""

from .admin_check import AdminCheck
from .agent_blocks import AgentBlocks
from .agent_file import AgentFile
from .agent_file_agents_item import AgentFileAgentsItem
from .agent_path import AgentPath
from .agent_view import AgentView
from .agents import Agents
from .api_key import ApiKey
from .append_block import AppendBlock
from .append_text import AppendText
from .attachment_path import AttachmentPath
from .block_path import BlockPath
from .block_view import BlockView
from .blocks import Blocks
from .call_record_view import CallRecordView
from .call_view import CallView
from .chat_message import ChatMessage
from .choice import Choice
from .completion import Completion
from .completion_request import CompletionRequest
from .completion_usage import CompletionUsage
from .context_stats import ContextStats
from .context_window import ContextWindow
from .create_agent import CreateAgent
from .create_block import CreateBlock
from .create_companion import CreateCompanion
from .create_key import CreateKey
from .create_tenant import CreateTenant
from .create_timer_type_0 import CreateTimerType0
from .create_timer_type_1 import CreateTimerType1
from .error_body import ErrorBody
from .error_code import ErrorCode
from .error_detail import ErrorDetail
from .event_type import EventType
from .export_agent_response_200 import ExportAgentResponse200
from .flush_view import FlushView
from .forget_passage import ForgetPassage
from .found_by import FoundBy
from .function_view import FunctionView
from .health import Health
from .import_query import ImportQuery
from .imported import Imported
from .insert_passages import InsertPassages
from .inserted import Inserted
from .key_path import KeyPath
from .keys import Keys
from .list_messages import ListMessages
from .loop_style import LoopStyle
from .message_view import MessageView
from .mode import Mode
from .model_path import ModelPath
from .model_view import ModelView
from .models import Models
from .new_block import NewBlock
from .new_key import NewKey
from .page_query import PageQuery
from .page_view import PageView
from .page_view_2 import PageView2
from .paging_view import PagingView
from .passage_path import PassagePath
from .pending_call_view import PendingCallView
from .prompt_message import PromptMessage
from .queued_view import QueuedView
from .queued_view_signals import QueuedViewSignals
from .recall_results import RecallResults
from .replace_block import ReplaceBlock
from .scored_view import ScoredView
from .scored_view_2 import ScoredView2
from .scored_view_2_metadata import ScoredView2Metadata
from .scored_view_3 import ScoredView3
from .search_archival import SearchArchival
from .search_recall import SearchRecall
from .send_message import SendMessage
from .shared_block_path import SharedBlockPath
from .shared_block_view import SharedBlockView
from .shared_blocks import SharedBlocks
from .skill_view import SkillView
from .step_view import StepView
from .stream_message_response_200_type_1 import StreamMessageResponse200Type1
from .stream_message_response_200_type_1_event import StreamMessageResponse200Type1Event
from .stream_options import StreamOptions
from .summary_revision_view import SummaryRevisionView
from .summary_view import SummaryView
from .tenant import Tenant
from .tenant_path import TenantPath
from .tenants import Tenants
from .timer import Timer
from .timer_path import TimerPath
from .timers import Timers
from .tool_rule_children import ToolRuleChildren
from .tool_rule_children_by_output import ToolRuleChildrenByOutput
from .tool_rule_continue import ToolRuleContinue
from .tool_rule_max_calls import ToolRuleMaxCalls
from .tool_rule_required_before_exit import ToolRuleRequiredBeforeExit
from .tool_rule_requires_approval import ToolRuleRequiresApproval
from .tool_rule_run_first import ToolRuleRunFirst
from .tool_rule_terminal import ToolRuleTerminal
from .update_agent import UpdateAgent
from .update_block import UpdateBlock
from .update_passage import UpdatePassage

__all__ = (
    "AdminCheck",
    "AgentBlocks",
    "AgentFile",
    "AgentFileAgentsItem",
    "AgentPath",
    "Agents",
    "AgentView",
    "ApiKey",
    "AppendBlock",
    "AppendText",
    "AttachmentPath",
    "BlockPath",
    "Blocks",
    "BlockView",
    "CallRecordView",
    "CallView",
    "ChatMessage",
    "Choice",
    "Completion",
    "CompletionRequest",
    "CompletionUsage",
    "ContextStats",
    "ContextWindow",
    "CreateAgent",
    "CreateBlock",
    "CreateCompanion",
    "CreateKey",
    "CreateTenant",
    "CreateTimerType0",
    "CreateTimerType1",
    "ErrorBody",
    "ErrorCode",
    "ErrorDetail",
    "EventType",
    "ExportAgentResponse200",
    "FlushView",
    "ForgetPassage",
    "FoundBy",
    "FunctionView",
    "Health",
    "Imported",
    "ImportQuery",
    "Inserted",
    "InsertPassages",
    "KeyPath",
    "Keys",
    "ListMessages",
    "LoopStyle",
    "MessageView",
    "Mode",
    "ModelPath",
    "Models",
    "ModelView",
    "NewBlock",
    "NewKey",
    "PageQuery",
    "PageView",
    "PageView2",
    "PagingView",
    "PassagePath",
    "PendingCallView",
    "PromptMessage",
    "QueuedView",
    "QueuedViewSignals",
    "RecallResults",
    "ReplaceBlock",
    "ScoredView",
    "ScoredView2",
    "ScoredView2Metadata",
    "ScoredView3",
    "SearchArchival",
    "SearchRecall",
    "SendMessage",
    "SharedBlockPath",
    "SharedBlocks",
    "SharedBlockView",
    "SkillView",
    "StepView",
    "StreamMessageResponse200Type1",
    "StreamMessageResponse200Type1Event",
    "StreamOptions",
    "SummaryRevisionView",
    "SummaryView",
    "Tenant",
    "TenantPath",
    "Tenants",
    "Timer",
    "TimerPath",
    "Timers",
    "ToolRuleChildren",
    "ToolRuleChildrenByOutput",
    "ToolRuleContinue",
    "ToolRuleMaxCalls",
    "ToolRuleRequiredBeforeExit",
    "ToolRuleRequiresApproval",
    "ToolRuleRunFirst",
    "ToolRuleTerminal",
    "UpdateAgent",
    "UpdateBlock",
    "UpdatePassage",
)
