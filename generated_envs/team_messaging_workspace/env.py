import re
from datetime import datetime
from typing import Dict, List, Literal, Optional, TypedDict


class WorkspaceInfo(TypedDict):
    workspace_id: str
    name: str
    domain: str
    plan: str  # "free" | "pro" | "enterprise"
    created_at: str  # ISO 8601 date-time, UTC, e.g. "2024-06-03T10:00:00"


class MemberInfo(TypedDict):
    member_id: str
    workspace_id: str
    display_name: str
    email: str
    role: str  # "owner" | "admin" | "member" | "guest"
    status: str  # "active" | "deactivated"
    joined_at: str  # ISO 8601 date-time


class ChannelInfo(TypedDict):
    channel_id: str
    workspace_id: str
    name: str  # lowercase letters, digits, "-" and "_", at most 32 characters
    topic: str
    is_private: bool
    is_archived: bool
    created_by: str  # member_id
    created_at: str  # ISO 8601 date-time
    member_ids: List[str]


class MessageInfo(TypedDict):
    message_id: str
    channel_id: str
    author_id: str  # member_id
    text: str  # empty once deleted
    posted_at: str  # ISO 8601 date-time, UTC, without offset
    thread_parent_id: Optional[str]  # None for a top-level message
    reply_count: int  # replies in the thread (top-level messages only)
    edited_at: Optional[str]
    is_deleted: bool


class ReadMarkerInfo(TypedDict):
    marker_id: str  # "<channel_id>:<member_id>"
    channel_id: str
    member_id: str
    last_read_message_id: str
    updated_at: str


class MuteInfo(TypedDict):
    mute_id: str
    channel_id: str
    member_id: str
    muted_until: Optional[str]  # None: muted until unmuted
    created_at: str


class TeamMessagingWorkspace:
    CHANNEL_LIMITS = {"free": 6, "pro": 50, "enterprise": 500}
    GUEST_CHANNEL_LIMIT = 2
    MAX_MESSAGE_LENGTH = 4000
    MAX_CHANNEL_NAME_LENGTH = 32
    DEFAULT_CHANNEL = "general"

    def __init__(self, init_config: dict):
        # Workspaces (one company or team each), by workspace_id.
        self.workspaces: Dict[str, WorkspaceInfo] = {}
        # People in a workspace, by member_id.
        self.members: Dict[str, MemberInfo] = {}
        # Channels of a workspace with their member lists, by channel_id.
        self.channels: Dict[str, ChannelInfo] = {}
        # Messages and thread replies, by message_id.
        self.messages: Dict[str, MessageInfo] = {}
        # How far each member has read each channel, by marker_id.
        self.read_markers: Dict[str, ReadMarkerInfo] = {}
        # Channel mutes of members, by mute_id.
        self.mutes: Dict[str, MuteInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - Members, channels and messages refer to existing workspaces, channels and members;
        #   a channel's member_ids hold only active members of the channel's workspace.
        # - Channel names are unique within a workspace (archived channels keep their name), and
        #   consist of 1-32 lowercase letters, digits, "-" or "_".
        # - A workspace may have at most CHANNEL_LIMITS[plan] non-archived channels
        #   (free 6, pro 50, enterprise 500).
        # - Guests cannot create channels, cannot join channels by themselves (they must be added)
        #   and may belong to at most GUEST_CHANNEL_LIMIT (2) non-archived channels.
        # - Deactivated members cannot act and cannot be added to channels.
        # - Any active non-guest member may join a public channel; only members of a private
        #   channel may add people to it. Adding someone else to a public channel requires being
        #   in it, or being a workspace owner or admin.
        # - Archived channels are read-only: no posts, edits, deletions, joins or removals.
        #   Only workspace owners/admins or the channel's creator may archive a channel.
        # - The "general" channel cannot be archived, left, or have members removed.
        # - Only channel members may post. Text is 1-4000 characters and not blank.
        # - A thread reply answers a top-level, non-deleted message of the same channel (no
        #   nested threads); it increments the parent's reply_count, and deleting it decrements it.
        # - Only the author may edit a message; the author or a workspace owner/admin may delete
        #   it. Deleted messages stay with is_deleted True and empty text, and cannot be edited.
        # - A read marker points to a top-level message of its channel, belongs to a member of
        #   that channel, and never moves backwards. Posting a top-level message marks the
        #   channel read for its author.
        # - At most one mute per member and channel; only channel members may mute; a mute's
        #   muted_until, when given, lies in the future.
        # - Leaving or being removed from a channel drops the member's mute and read marker there.

    def get_workspace(self, workspace_id: str) -> dict:
        """Get a workspace with its plan, its channel limit and live counts.

        Args:
            workspace_id (str): The workspace's id, e.g. "W-01".

        Returns:
            dict: {"success": True, "data": WorkspaceInfo plus "channel_limit", "active_members",
            "open_channels" and "archived_channels"}, or {"success": False, "error": str}.
        """
        if not isinstance(workspace_id, str) or not workspace_id.strip():
            return {"success": False, "error": "workspace_id must be a non-empty string."}
        workspace = self.workspaces.get(workspace_id)
        if workspace is None:
            return {"success": False, "error": f"Workspace {workspace_id} not found."}
        channels = [c for c in self.channels.values() if c.get("workspace_id") == workspace_id]
        data = dict(workspace)
        data["channel_limit"] = self.CHANNEL_LIMITS.get(workspace.get("plan"), 0)
        data["active_members"] = sum(1 for m in self.members.values()
                                     if m.get("workspace_id") == workspace_id
                                     and m.get("status") == "active")
        data["open_channels"] = sum(1 for c in channels if not c.get("is_archived"))
        data["archived_channels"] = sum(1 for c in channels if c.get("is_archived"))
        return {"success": True, "data": data}

    def get_member(self, member_id: str) -> dict:
        """Get a member's profile and the open channels they belong to.

        Args:
            member_id (str): The member's id, e.g. "U-101".

        Returns:
            dict: {"success": True, "data": MemberInfo plus "channel_ids"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(member_id, str) or not member_id.strip():
            return {"success": False, "error": "member_id must be a non-empty string."}
        member = self.members.get(member_id)
        if member is None:
            return {"success": False, "error": f"Member {member_id} not found."}
        data = dict(member)
        data["channel_ids"] = sorted(cid for cid, c in self.channels.items()
                                     if member_id in c.get("member_ids", []) and not c.get("is_archived"))
        return {"success": True, "data": data}

    def find_members(self, query: str, workspace_id: Optional[str] = None,
                     include_deactivated: bool = False) -> dict:
        """Find members by display name or email (case-insensitive substring).

        Args:
            query (str): Text to look for in display names and emails.
            workspace_id (str, optional): Only members of this workspace.
            include_deactivated (bool): Also return deactivated members.

        Returns:
            dict: {"success": True, "data": List[MemberInfo]} sorted by member_id (possibly empty),
            or {"success": False, "error": str}.
        """
        if not isinstance(query, str):
            return {"success": False, "error": "query must be a string."}
        if workspace_id is not None and not isinstance(workspace_id, str):
            return {"success": False, "error": "workspace_id must be a string or null."}
        if not isinstance(include_deactivated, bool):
            return {"success": False, "error": "include_deactivated must be a boolean."}
        needle = query.strip().lower()
        if not needle:
            return {"success": False, "error": "query must not be empty."}
        if workspace_id is not None and workspace_id not in self.workspaces:
            return {"success": False, "error": f"Workspace {workspace_id} not found."}
        found = []
        for member_id in sorted(self.members):
            member = self.members[member_id]
            if workspace_id is not None and member.get("workspace_id") != workspace_id:
                continue
            if member.get("status") != "active" and not include_deactivated:
                continue
            if needle in str(member.get("display_name", "")).lower() or \
                    needle in str(member.get("email", "")).lower():
                found.append(dict(member))
        return {"success": True, "data": found}

    def list_members(self, workspace_id: str,
                     role: Optional[Literal["owner", "admin", "member", "guest"]] = None,
                     status: Optional[Literal["active", "deactivated"]] = None) -> dict:
        """List a workspace's members, optionally by role and status.

        Args:
            workspace_id (str): The workspace's id.
            role (str, optional): "owner", "admin", "member" or "guest".
            status (str, optional): "active" or "deactivated".

        Returns:
            dict: {"success": True, "data": List[MemberInfo]} sorted by member_id, or
            {"success": False, "error": str}.
        """
        if not isinstance(workspace_id, str):
            return {"success": False, "error": "workspace_id must be a string."}
        if role is not None and role not in ("owner", "admin", "member", "guest"):
            return {"success": False, "error": "role must be owner, admin, member or guest."}
        if status is not None and status not in ("active", "deactivated"):
            return {"success": False, "error": "status must be active or deactivated."}
        if workspace_id not in self.workspaces:
            return {"success": False, "error": f"Workspace {workspace_id} not found."}
        found = [dict(m) for mid, m in sorted(self.members.items())
                 if m.get("workspace_id") == workspace_id
                 and (role is None or m.get("role") == role)
                 and (status is None or m.get("status") == status)]
        return {"success": True, "data": found}

    def list_channels(self, workspace_id: str, include_archived: bool = False,
                      member_id: Optional[str] = None) -> dict:
        """List the channels of a workspace.

        Args:
            workspace_id (str): The workspace's id.
            include_archived (bool): Also list archived channels.
            member_id (str, optional): Only channels this member belongs to.

        Returns:
            dict: {"success": True, "data": [{"channel_id", "name", "topic", "is_private",
            "is_archived", "member_count"}]} sorted by name, or {"success": False, "error": str}.
        """
        if not isinstance(workspace_id, str):
            return {"success": False, "error": "workspace_id must be a string."}
        if not isinstance(include_archived, bool):
            return {"success": False, "error": "include_archived must be a boolean."}
        if member_id is not None and not isinstance(member_id, str):
            return {"success": False, "error": "member_id must be a string or null."}
        if workspace_id not in self.workspaces:
            return {"success": False, "error": f"Workspace {workspace_id} not found."}
        if member_id is not None and member_id not in self.members:
            return {"success": False, "error": f"Member {member_id} not found."}
        rows = []
        for channel in self.channels.values():
            if channel.get("workspace_id") != workspace_id:
                continue
            if channel.get("is_archived") and not include_archived:
                continue
            if member_id is not None and member_id not in channel.get("member_ids", []):
                continue
            rows.append({"channel_id": channel["channel_id"], "name": channel.get("name"),
                         "topic": channel.get("topic", ""), "is_private": channel.get("is_private"),
                         "is_archived": channel.get("is_archived"),
                         "member_count": len(channel.get("member_ids", []))})
        rows.sort(key=lambda row: (str(row["name"]), row["channel_id"]))
        return {"success": True, "data": rows}

    def get_channel(self, channel_id: str) -> dict:
        """Get a channel's details.

        Args:
            channel_id (str): The channel's id, e.g. "CH-003".

        Returns:
            dict: {"success": True, "data": ChannelInfo plus "member_count", "message_count" and
            "last_message_at"}, or {"success": False, "error": str}.
        """
        if not isinstance(channel_id, str) or not channel_id.strip():
            return {"success": False, "error": "channel_id must be a non-empty string."}
        channel = self.channels.get(channel_id)
        if channel is None:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        top = [m for m in self.messages.values() if m.get("channel_id") == channel_id
               and m.get("thread_parent_id") is None and not m.get("is_deleted")]
        data = dict(channel)
        data["member_ids"] = list(channel.get("member_ids", []))
        data["member_count"] = len(data["member_ids"])
        data["message_count"] = len(top)
        data["last_message_at"] = max((str(m.get("posted_at")) for m in top), default=None)
        return {"success": True, "data": data}

    def get_channel_messages(self, channel_id: str, limit: int = 20,
                             include_deleted: bool = False) -> dict:
        """Get the latest top-level messages of a channel, oldest first.

        Args:
            channel_id (str): The channel's id.
            limit (int): How many of the latest messages to return, 1-100.
            include_deleted (bool): Also return deleted messages (their text is empty).

        Returns:
            dict: {"success": True, "data": List[MessageInfo]}, or {"success": False, "error": str}.
        """
        if not isinstance(channel_id, str):
            return {"success": False, "error": "channel_id must be a string."}
        if not isinstance(limit, int) or isinstance(limit, bool):
            return {"success": False, "error": "limit must be an integer."}
        if not isinstance(include_deleted, bool):
            return {"success": False, "error": "include_deleted must be a boolean."}
        if not 1 <= limit <= 100:
            return {"success": False, "error": "limit must be between 1 and 100."}
        if channel_id not in self.channels:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        rows = [dict(m) for m in self.messages.values() if m.get("channel_id") == channel_id
                and m.get("thread_parent_id") is None and (include_deleted or not m.get("is_deleted"))]
        rows.sort(key=lambda m: (str(m.get("posted_at")), m["message_id"]))
        return {"success": True, "data": rows[-limit:]}

    def get_thread(self, message_id: str) -> dict:
        """Get a thread: the parent message and its replies, oldest first.

        Args:
            message_id (str): The id of the parent message (a reply's id gives its thread).

        Returns:
            dict: {"success": True, "data": {"parent": MessageInfo, "replies": List[MessageInfo]}},
            or {"success": False, "error": str}.
        """
        if not isinstance(message_id, str) or not message_id.strip():
            return {"success": False, "error": "message_id must be a non-empty string."}
        message = self.messages.get(message_id)
        if message is None:
            return {"success": False, "error": f"Message {message_id} not found."}
        parent_id = message.get("thread_parent_id") or message_id
        parent = self.messages.get(parent_id)
        if parent is None:
            return {"success": False, "error": f"The thread parent {parent_id} no longer exists."}
        replies = [dict(m) for m in self.messages.values() if m.get("thread_parent_id") == parent_id]
        replies.sort(key=lambda m: (str(m.get("posted_at")), m["message_id"]))
        return {"success": True, "data": {"parent": dict(parent), "replies": replies}}

    def get_message(self, message_id: str) -> dict:
        """Get one message.

        Args:
            message_id (str): The message's id, e.g. "MSG-0007".

        Returns:
            dict: {"success": True, "data": MessageInfo}, or {"success": False, "error": str}.
        """
        if not isinstance(message_id, str) or not message_id.strip():
            return {"success": False, "error": "message_id must be a non-empty string."}
        message = self.messages.get(message_id)
        if message is None:
            return {"success": False, "error": f"Message {message_id} not found."}
        return {"success": True, "data": dict(message)}

    def search_messages(self, workspace_id: str, query: str, channel_id: Optional[str] = None,
                        author_id: Optional[str] = None) -> dict:
        """Search messages (including thread replies) of a workspace.

        Args:
            workspace_id (str): The workspace to search.
            query (str): Text to look for (case-insensitive).
            channel_id (str, optional): Only this channel.
            author_id (str, optional): Only messages by this member.

        Returns:
            dict: {"success": True, "data": List[MessageInfo]} oldest first, or
            {"success": False, "error": str}.
        """
        if not isinstance(workspace_id, str) or not isinstance(query, str):
            return {"success": False, "error": "workspace_id and query must be strings."}
        if channel_id is not None and not isinstance(channel_id, str):
            return {"success": False, "error": "channel_id must be a string or null."}
        if author_id is not None and not isinstance(author_id, str):
            return {"success": False, "error": "author_id must be a string or null."}
        if workspace_id not in self.workspaces:
            return {"success": False, "error": f"Workspace {workspace_id} not found."}
        needle = query.strip().lower()
        if not needle:
            return {"success": False, "error": "query must not be empty."}
        if channel_id is not None:
            channel = self.channels.get(channel_id)
            if channel is None or channel.get("workspace_id") != workspace_id:
                return {"success": False, "error": f"Channel {channel_id} not found in {workspace_id}."}
        in_workspace = {cid for cid, c in self.channels.items() if c.get("workspace_id") == workspace_id}
        rows = [dict(m) for m in self.messages.values()
                if m.get("channel_id") in in_workspace and not m.get("is_deleted")
                and (channel_id is None or m.get("channel_id") == channel_id)
                and (author_id is None or m.get("author_id") == author_id)
                and needle in str(m.get("text", "")).lower()]
        rows.sort(key=lambda m: (str(m.get("posted_at")), m["message_id"]))
        return {"success": True, "data": rows}

    def get_unread_counts(self, member_id: str) -> dict:
        """Unread counts per open channel of a member, with their mute status.

        Args:
            member_id (str): The member's id.

        Returns:
            dict: {"success": True, "data": [{"channel_id", "name", "unread", "last_read_message_id",
            "muted", "muted_until"}]} sorted by channel name, or {"success": False, "error": str}.
        """
        if not isinstance(member_id, str) or not member_id.strip():
            return {"success": False, "error": "member_id must be a non-empty string."}
        if member_id not in self.members:
            return {"success": False, "error": f"Member {member_id} not found."}
        now = datetime.now().replace(microsecond=0).isoformat()
        rows = []
        for channel_id, channel in self.channels.items():
            if channel.get("is_archived") or member_id not in channel.get("member_ids", []):
                continue
            marker = self.read_markers.get(f"{channel_id}:{member_id}")
            position = None
            if marker is not None:
                read = self.messages.get(marker.get("last_read_message_id"))
                if read is not None:
                    position = (str(read.get("posted_at")), read["message_id"])
            unread = 0
            for message in self.messages.values():
                if message.get("channel_id") != channel_id or message.get("thread_parent_id") is not None:
                    continue
                if message.get("is_deleted") or message.get("author_id") == member_id:
                    continue
                if position is None or (str(message.get("posted_at")), message["message_id"]) > position:
                    unread += 1
            mute = next((m for m in self.mutes.values() if m.get("channel_id") == channel_id
                         and m.get("member_id") == member_id), None)
            muted = mute is not None and (mute.get("muted_until") is None
                                          or str(mute.get("muted_until")) > now)
            rows.append({"channel_id": channel_id, "name": channel.get("name"), "unread": unread,
                         "last_read_message_id": marker.get("last_read_message_id") if marker else None,
                         "muted": muted, "muted_until": mute.get("muted_until") if mute else None})
        rows.sort(key=lambda row: (str(row["name"]), row["channel_id"]))
        return {"success": True, "data": rows}

    def list_mutes(self, member_id: str) -> dict:
        """List a member's channel mutes.

        Args:
            member_id (str): The member's id.

        Returns:
            dict: {"success": True, "data": [MuteInfo plus "channel_name" and "active"]}, or
            {"success": False, "error": str}.
        """
        if not isinstance(member_id, str) or not member_id.strip():
            return {"success": False, "error": "member_id must be a non-empty string."}
        if member_id not in self.members:
            return {"success": False, "error": f"Member {member_id} not found."}
        now = datetime.now().replace(microsecond=0).isoformat()
        rows = []
        for mute_id in sorted(self.mutes):
            mute = self.mutes[mute_id]
            if mute.get("member_id") != member_id:
                continue
            row = dict(mute)
            channel = self.channels.get(mute.get("channel_id"), {})
            row["channel_name"] = channel.get("name")
            row["active"] = mute.get("muted_until") is None or str(mute.get("muted_until")) > now
            rows.append(row)
        return {"success": True, "data": rows}

    def create_channel(self, workspace_id: str, creator_id: str, name: str, is_private: bool = False,
                       topic: str = "") -> dict:
        """Create a channel; its creator becomes its first member.

        Args:
            workspace_id (str): The workspace to create the channel in.
            creator_id (str): The member creating it (active, not a guest, of that workspace).
            name (str): 1-32 lowercase letters, digits, "-" or "_"; spaces become "-".
            is_private (bool): Whether the channel is private.
            topic (str): An optional topic, at most 250 characters.

        Returns:
            dict: {"success": True, "message": str, "data": {"channel_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("workspace_id", workspace_id), ("creator_id", creator_id),
                             ("name", name), ("topic", topic)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        if not isinstance(is_private, bool):
            return {"success": False, "error": "is_private must be a boolean."}
        workspace = self.workspaces.get(workspace_id)
        if workspace is None:
            return {"success": False, "error": f"Workspace {workspace_id} not found."}
        creator = self.members.get(creator_id)
        if creator is None or creator.get("workspace_id") != workspace_id:
            return {"success": False, "error": f"Member {creator_id} not found in {workspace_id}."}
        if creator.get("status") != "active":
            return {"success": False, "error": f"Member {creator_id} is deactivated."}
        if creator.get("role") == "guest":
            return {"success": False, "error": "Guests cannot create channels."}
        clean = "-".join(name.strip().lower().split())
        if not re.fullmatch(r"[a-z0-9_-]{1,32}", clean):
            return {"success": False, "error": "Channel names use 1-32 lowercase letters, digits, '-' or '_'."}
        if len(topic) > 250:
            return {"success": False, "error": "The topic is limited to 250 characters."}
        in_workspace = [c for c in self.channels.values() if c.get("workspace_id") == workspace_id]
        taken = next((c for c in in_workspace if str(c.get("name")).lower() == clean), None)
        if taken is not None:
            state = "an archived" if taken.get("is_archived") else "a"
            return {"success": False, "error": f"The name #{clean} is already used by {state} channel ({taken['channel_id']})."}
        limit = self.CHANNEL_LIMITS.get(workspace.get("plan"), 0)
        open_count = sum(1 for c in in_workspace if not c.get("is_archived"))
        if open_count >= limit:
            return {"success": False, "error": f"The {workspace.get('plan')} plan allows {limit} open channels and {workspace_id} has {open_count}; archive one first."}
        number = len(self.channels) + 1
        while f"CH-{number:03d}" in self.channels:
            number += 1
        channel_id = f"CH-{number:03d}"
        self.channels[channel_id] = {
            "channel_id": channel_id, "workspace_id": workspace_id, "name": clean,
            "topic": topic.strip(), "is_private": is_private, "is_archived": False,
            "created_by": creator_id, "created_at": datetime.now().replace(microsecond=0).isoformat(),
            "member_ids": [creator_id]}
        return {"success": True, "message": f"Channel #{clean} ({channel_id}) created.",
                "data": {"channel_id": channel_id}}

    def add_channel_member(self, channel_id: str, actor_id: str, member_id: str) -> dict:
        """Add a member to a channel (join when actor_id == member_id).

        Args:
            channel_id (str): The channel.
            actor_id (str): Who performs the action.
            member_id (str): Who is added.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        for label, value in (("channel_id", channel_id), ("actor_id", actor_id),
                             ("member_id", member_id)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        channel = self.channels.get(channel_id)
        if channel is None:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        if channel.get("is_archived"):
            return {"success": False, "error": f"Channel #{channel.get('name')} is archived."}
        actor = self.members.get(actor_id)
        member = self.members.get(member_id)
        if actor is None or actor.get("workspace_id") != channel.get("workspace_id"):
            return {"success": False, "error": f"Member {actor_id} not found in the channel's workspace."}
        if member is None or member.get("workspace_id") != channel.get("workspace_id"):
            return {"success": False, "error": f"Member {member_id} not found in the channel's workspace."}
        if actor.get("status") != "active":
            return {"success": False, "error": f"Member {actor_id} is deactivated."}
        if member.get("status") != "active":
            return {"success": False, "error": f"Member {member_id} is deactivated and cannot be added."}
        members = channel.setdefault("member_ids", [])
        if member_id in members:
            return {"success": False, "error": f"{member_id} is already in #{channel.get('name')}."}
        if actor_id == member_id:
            if channel.get("is_private"):
                return {"success": False, "error": "Private channels can only be joined when a member adds you."}
            if member.get("role") == "guest":
                return {"success": False, "error": "Guests cannot join channels by themselves."}
        else:
            in_channel = actor_id in members
            is_admin = actor.get("role") in ("owner", "admin")
            if channel.get("is_private") and not in_channel:
                return {"success": False, "error": f"Only members of the private channel #{channel.get('name')} can add people."}
            if not in_channel and not is_admin:
                return {"success": False, "error": f"{actor_id} must be in #{channel.get('name')} to add people."}
        if member.get("role") == "guest":
            count = sum(1 for c in self.channels.values()
                        if member_id in c.get("member_ids", []) and not c.get("is_archived"))
            if count >= self.GUEST_CHANNEL_LIMIT:
                return {"success": False, "error": f"Guest {member_id} already belongs to {count} channels (limit {self.GUEST_CHANNEL_LIMIT})."}
        members.append(member_id)
        verb = "joined" if actor_id == member_id else f"was added by {actor_id} to"
        return {"success": True, "message": f"{member_id} {verb} #{channel.get('name')}."}

    def remove_channel_member(self, channel_id: str, actor_id: str, member_id: str) -> dict:
        """Remove a member from a channel (leave when actor_id == member_id).

        Args:
            channel_id (str): The channel.
            actor_id (str): Who performs the action.
            member_id (str): Who leaves or is removed.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        for label, value in (("channel_id", channel_id), ("actor_id", actor_id),
                             ("member_id", member_id)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        channel = self.channels.get(channel_id)
        if channel is None:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        if channel.get("is_archived"):
            return {"success": False, "error": f"Channel #{channel.get('name')} is archived."}
        if channel.get("name") == self.DEFAULT_CHANNEL:
            return {"success": False, "error": "Nobody can leave or be removed from #general."}
        actor = self.members.get(actor_id)
        if actor is None or actor.get("workspace_id") != channel.get("workspace_id"):
            return {"success": False, "error": f"Member {actor_id} not found in the channel's workspace."}
        if actor.get("status") != "active":
            return {"success": False, "error": f"Member {actor_id} is deactivated."}
        members = channel.get("member_ids", [])
        if member_id not in members:
            return {"success": False, "error": f"{member_id} is not in #{channel.get('name')}."}
        if actor_id != member_id and actor.get("role") not in ("owner", "admin") \
                and channel.get("created_by") != actor_id:
            return {"success": False, "error": "Only workspace owners/admins or the channel's creator can remove others."}
        channel["member_ids"] = [mid for mid in members if mid != member_id]
        self.read_markers.pop(f"{channel_id}:{member_id}", None)
        for mute_id in [k for k, m in self.mutes.items()
                        if m.get("channel_id") == channel_id and m.get("member_id") == member_id]:
            del self.mutes[mute_id]
        return {"success": True, "message": f"{member_id} is no longer in #{channel.get('name')}."}

    def post_message(self, channel_id: str, author_id: str, text: str,
                     thread_parent_id: Optional[str] = None) -> dict:
        """Post a message, or reply in a thread.

        Args:
            channel_id (str): The channel to post in.
            author_id (str): The member posting (must be in the channel).
            text (str): 1-4000 characters, not blank.
            thread_parent_id (str, optional): Reply in the thread of this top-level message.

        Returns:
            dict: {"success": True, "message": str, "data": {"message_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("channel_id", channel_id), ("author_id", author_id), ("text", text)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        if thread_parent_id is not None and not isinstance(thread_parent_id, str):
            return {"success": False, "error": "thread_parent_id must be a string or null."}
        channel = self.channels.get(channel_id)
        if channel is None:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        if channel.get("is_archived"):
            return {"success": False, "error": f"Channel #{channel.get('name')} is archived and read-only."}
        author = self.members.get(author_id)
        if author is None:
            return {"success": False, "error": f"Member {author_id} not found."}
        if author.get("status") != "active":
            return {"success": False, "error": f"Member {author_id} is deactivated."}
        if author_id not in channel.get("member_ids", []):
            return {"success": False, "error": f"{author_id} is not a member of #{channel.get('name')}."}
        if not text.strip():
            return {"success": False, "error": "The message text is empty."}
        if len(text) > self.MAX_MESSAGE_LENGTH:
            return {"success": False, "error": f"Messages are limited to {self.MAX_MESSAGE_LENGTH} characters."}
        parent = None
        if thread_parent_id is not None:
            parent = self.messages.get(thread_parent_id)
            if parent is None or parent.get("channel_id") != channel_id:
                return {"success": False, "error": f"Message {thread_parent_id} is not in #{channel.get('name')}."}
            if parent.get("thread_parent_id") is not None:
                return {"success": False, "error": "Replies go to the top-level message of a thread, not to a reply."}
            if parent.get("is_deleted"):
                return {"success": False, "error": f"Message {thread_parent_id} was deleted."}
        number = len(self.messages) + 1
        while f"MSG-{number:04d}" in self.messages:
            number += 1
        message_id = f"MSG-{number:04d}"
        now = datetime.now().replace(microsecond=0).isoformat()
        self.messages[message_id] = {
            "message_id": message_id, "channel_id": channel_id, "author_id": author_id,
            "text": text, "posted_at": now, "thread_parent_id": thread_parent_id,
            "reply_count": 0, "edited_at": None, "is_deleted": False}
        if parent is not None:
            parent["reply_count"] = int(parent.get("reply_count", 0)) + 1
            return {"success": True, "message": f"Reply {message_id} posted in the thread of {thread_parent_id}.",
                    "data": {"message_id": message_id}}
        marker_id = f"{channel_id}:{author_id}"
        self.read_markers[marker_id] = {"marker_id": marker_id, "channel_id": channel_id,
                                        "member_id": author_id, "last_read_message_id": message_id,
                                        "updated_at": now}
        return {"success": True, "message": f"Message {message_id} posted to #{channel.get('name')}.",
                "data": {"message_id": message_id}}

    def edit_message(self, message_id: str, editor_id: str, text: str) -> dict:
        """Edit a message's text.

        Args:
            message_id (str): The message to edit.
            editor_id (str): Who edits it (must be its author).
            text (str): The new text, 1-4000 characters, not blank.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        for label, value in (("message_id", message_id), ("editor_id", editor_id), ("text", text)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        message = self.messages.get(message_id)
        if message is None:
            return {"success": False, "error": f"Message {message_id} not found."}
        if message.get("is_deleted"):
            return {"success": False, "error": f"Message {message_id} was deleted."}
        channel = self.channels.get(message.get("channel_id"), {})
        if channel.get("is_archived"):
            return {"success": False, "error": "The message's channel is archived and read-only."}
        if message.get("author_id") != editor_id:
            return {"success": False, "error": "Only the author can edit a message."}
        editor = self.members.get(editor_id)
        if editor is None or editor.get("status") != "active":
            return {"success": False, "error": f"Member {editor_id} cannot act."}
        if not text.strip():
            return {"success": False, "error": "The message text is empty."}
        if len(text) > self.MAX_MESSAGE_LENGTH:
            return {"success": False, "error": f"Messages are limited to {self.MAX_MESSAGE_LENGTH} characters."}
        message["text"] = text
        message["edited_at"] = datetime.now().replace(microsecond=0).isoformat()
        return {"success": True, "message": f"Message {message_id} edited."}

    def delete_message(self, message_id: str, actor_id: str) -> dict:
        """Delete a message (soft delete).

        Args:
            message_id (str): The message to delete.
            actor_id (str): Who deletes it: its author or a workspace owner/admin.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(message_id, str) or not isinstance(actor_id, str):
            return {"success": False, "error": "message_id and actor_id must be strings."}
        message = self.messages.get(message_id)
        if message is None:
            return {"success": False, "error": f"Message {message_id} not found."}
        if message.get("is_deleted"):
            return {"success": False, "error": f"Message {message_id} is already deleted."}
        channel = self.channels.get(message.get("channel_id"), {})
        if channel.get("is_archived"):
            return {"success": False, "error": "The message's channel is archived and read-only."}
        actor = self.members.get(actor_id)
        if actor is None or actor.get("workspace_id") != channel.get("workspace_id"):
            return {"success": False, "error": f"Member {actor_id} not found in the channel's workspace."}
        if actor.get("status") != "active":
            return {"success": False, "error": f"Member {actor_id} is deactivated."}
        if message.get("author_id") != actor_id and actor.get("role") not in ("owner", "admin"):
            return {"success": False, "error": "Only the author or a workspace owner/admin can delete a message."}
        message["is_deleted"] = True
        message["text"] = ""
        parent = self.messages.get(message.get("thread_parent_id") or "")
        if parent is not None:
            parent["reply_count"] = max(0, int(parent.get("reply_count", 0)) - 1)
        return {"success": True, "message": f"Message {message_id} deleted."}

    def mark_channel_read(self, channel_id: str, member_id: str,
                          message_id: Optional[str] = None) -> dict:
        """Mark a channel read for a member, up to a message (default: the latest).

        Args:
            channel_id (str): The channel.
            member_id (str): The member (must be in the channel).
            message_id (str, optional): A top-level message of the channel to mark read up to.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(channel_id, str) or not isinstance(member_id, str):
            return {"success": False, "error": "channel_id and member_id must be strings."}
        if message_id is not None and not isinstance(message_id, str):
            return {"success": False, "error": "message_id must be a string or null."}
        channel = self.channels.get(channel_id)
        if channel is None:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        if member_id not in channel.get("member_ids", []):
            return {"success": False, "error": f"{member_id} is not a member of #{channel.get('name')}."}
        if message_id is None:
            top = [m for m in self.messages.values() if m.get("channel_id") == channel_id
                   and m.get("thread_parent_id") is None and not m.get("is_deleted")]
            if not top:
                return {"success": False, "error": f"#{channel.get('name')} has no messages to mark read."}
            target = max(top, key=lambda m: (str(m.get("posted_at")), m["message_id"]))
        else:
            target = self.messages.get(message_id)
            if target is None or target.get("channel_id") != channel_id:
                return {"success": False, "error": f"Message {message_id} is not in #{channel.get('name')}."}
            if target.get("thread_parent_id") is not None:
                return {"success": False, "error": "Read markers point to top-level messages, not thread replies."}
        marker_id = f"{channel_id}:{member_id}"
        marker = self.read_markers.get(marker_id)
        if marker is not None:
            current = self.messages.get(marker.get("last_read_message_id"))
            if current is not None and (str(current.get("posted_at")), current["message_id"]) > \
                    (str(target.get("posted_at")), target["message_id"]):
                return {"success": False, "error": f"{member_id} has already read past {target['message_id']}; read markers do not move backwards."}
        self.read_markers[marker_id] = {
            "marker_id": marker_id, "channel_id": channel_id, "member_id": member_id,
            "last_read_message_id": target["message_id"],
            "updated_at": datetime.now().replace(microsecond=0).isoformat()}
        return {"success": True, "message": f"#{channel.get('name')} marked read up to {target['message_id']} for {member_id}."}

    def mute_channel(self, channel_id: str, member_id: str, until: Optional[str] = None) -> dict:
        """Mute a channel for a member.

        Args:
            channel_id (str): The channel to mute.
            member_id (str): The member (must be in the channel).
            until (str, optional): ISO 8601 date or date-time (UTC) when the mute ends; omit for
                an indefinite mute.

        Returns:
            dict: {"success": True, "message": str, "data": {"mute_id": str}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(channel_id, str) or not isinstance(member_id, str):
            return {"success": False, "error": "channel_id and member_id must be strings."}
        if until is not None and not isinstance(until, str):
            return {"success": False, "error": "until must be an ISO date-time string or null."}
        channel = self.channels.get(channel_id)
        if channel is None:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        if member_id not in channel.get("member_ids", []):
            return {"success": False, "error": f"{member_id} is not a member of #{channel.get('name')}."}
        now = datetime.now().replace(microsecond=0)
        existing = next((m for m in self.mutes.values() if m.get("channel_id") == channel_id
                         and m.get("member_id") == member_id), None)
        if existing is not None:
            ended = existing.get("muted_until") is not None and str(existing.get("muted_until")) <= now.isoformat()
            state = f"has an expired mute ({existing['mute_id']}, until {existing.get('muted_until')}) on record" if ended \
                else f"is already muted ({existing['mute_id']})"
            return {"success": False, "error": f"#{channel.get('name')} {state} for {member_id}; unmute it first."}
        muted_until = None
        if until is not None:
            try:
                moment = datetime.fromisoformat(until.strip().replace("Z", "+00:00"))
            except ValueError:
                return {"success": False, "error": "until must be an ISO 8601 date or date-time."}
            if moment.tzinfo is not None:
                moment = moment.replace(tzinfo=None) - moment.utcoffset()
            if moment <= now:
                return {"success": False, "error": "until must lie in the future."}
            muted_until = moment.replace(microsecond=0).isoformat()
        number = len(self.mutes) + 1
        while f"MUTE-{number:03d}" in self.mutes:
            number += 1
        mute_id = f"MUTE-{number:03d}"
        self.mutes[mute_id] = {"mute_id": mute_id, "channel_id": channel_id, "member_id": member_id,
                               "muted_until": muted_until, "created_at": now.isoformat()}
        span = f"until {muted_until}" if muted_until else "until unmuted"
        return {"success": True, "message": f"#{channel.get('name')} muted for {member_id} {span}.",
                "data": {"mute_id": mute_id}}

    def unmute_channel(self, channel_id: str, member_id: str) -> dict:
        """Unmute a channel for a member.

        Args:
            channel_id (str): The channel.
            member_id (str): The member.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(channel_id, str) or not isinstance(member_id, str):
            return {"success": False, "error": "channel_id and member_id must be strings."}
        if channel_id not in self.channels:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        found = [k for k, m in self.mutes.items()
                 if m.get("channel_id") == channel_id and m.get("member_id") == member_id]
        if not found:
            return {"success": False, "error": f"{member_id} has not muted {channel_id}."}
        for mute_id in found:
            del self.mutes[mute_id]
        return {"success": True, "message": f"{channel_id} unmuted for {member_id}."}

    def archive_channel(self, channel_id: str, actor_id: str) -> dict:
        """Archive a channel.

        Args:
            channel_id (str): The channel to archive.
            actor_id (str): A workspace owner/admin or the channel's creator.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(channel_id, str) or not isinstance(actor_id, str):
            return {"success": False, "error": "channel_id and actor_id must be strings."}
        channel = self.channels.get(channel_id)
        if channel is None:
            return {"success": False, "error": f"Channel {channel_id} not found."}
        if channel.get("is_archived"):
            return {"success": False, "error": f"#{channel.get('name')} is already archived."}
        if channel.get("name") == self.DEFAULT_CHANNEL:
            return {"success": False, "error": "#general cannot be archived."}
        actor = self.members.get(actor_id)
        if actor is None or actor.get("workspace_id") != channel.get("workspace_id"):
            return {"success": False, "error": f"Member {actor_id} not found in the channel's workspace."}
        if actor.get("status") != "active":
            return {"success": False, "error": f"Member {actor_id} is deactivated."}
        if actor.get("role") not in ("owner", "admin") and channel.get("created_by") != actor_id:
            return {"success": False, "error": "Only workspace owners/admins or the channel's creator can archive it."}
        channel["is_archived"] = True
        return {"success": True, "message": f"#{channel.get('name')} archived."}
