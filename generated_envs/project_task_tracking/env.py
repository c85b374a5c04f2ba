from datetime import datetime
from typing import Dict, List, Literal, Optional, TypedDict


class UserInfo(TypedDict):
    user_id: str
    name: str
    email: str
    role: str  # "admin" | "member" | "viewer"
    status: str  # "active" | "inactive"


class ProjectInfo(TypedDict):
    project_id: str
    key: str  # short uppercase key used in task ids, e.g. "WEB"
    name: str
    owner_id: str  # user_id
    status: str  # "active" | "archived"
    member_ids: List[str]
    created_at: str  # ISO 8601 date-time


class TaskInfo(TypedDict):
    task_id: str  # "<project key>-<number>", e.g. "WEB-12"
    project_id: str
    title: str
    description: str
    status: str  # "todo" | "in_progress" | "in_review" | "done" | "cancelled"
    priority: str  # "low" | "medium" | "high" | "urgent"
    assignee_id: Optional[str]
    reporter_id: str
    due_date: Optional[str]  # ISO 8601 date, e.g. "2025-01-15"
    depends_on: List[str]  # task_ids that must be done before this task can start
    created_at: str  # ISO 8601 date-time
    updated_at: str  # ISO 8601 date-time
    completed_at: Optional[str]  # set when the task is done


class CommentInfo(TypedDict):
    comment_id: str
    task_id: str
    author_id: str
    body: str
    created_at: str  # ISO 8601 date-time


class ProjectTaskTracker:
    STATUS_TRANSITIONS = {
        "todo": ["in_progress", "cancelled"],
        "in_progress": ["todo", "in_review", "cancelled"],
        "in_review": ["in_progress", "done", "cancelled"],
        "done": ["in_progress"],
        "cancelled": ["todo"],
    }
    PRIORITIES = ["low", "medium", "high", "urgent"]
    WIP_LIMIT = 3
    MAX_TITLE_LENGTH = 120
    MAX_COMMENT_LENGTH = 2000

    def __init__(self, init_config: dict):
        # People who use the tracker, by user_id.
        self.users: Dict[str, UserInfo] = {}
        # Projects with their members, by project_id.
        self.projects: Dict[str, ProjectInfo] = {}
        # Tasks of all projects, by task_id.
        self.tasks: Dict[str, TaskInfo] = {}
        # Comments on tasks, by comment_id.
        self.comments: Dict[str, CommentInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - A task belongs to an existing project; its reporter and assignee are existing users.
        #   Task ids are "<project key>-<n>", numbered within the project.
        # - Archived projects are read-only: no new tasks, task changes, comments or new members.
        # - Assignees must be active members of the task's project and not viewers; reporters must
        #   be active, non-viewer project members; commenters must be active project members.
        # - Status changes follow STATUS_TRANSITIONS: todo -> in_progress | cancelled;
        #   in_progress -> todo | in_review | cancelled; in_review -> in_progress | done |
        #   cancelled; done -> in_progress (reopen); cancelled -> todo (restore).
        # - A task can move to in_progress only with an assignee and when every task it depends on
        #   is done. completed_at is set when a task is done and cleared when it is reopened.
        # - A user may have at most WIP_LIMIT (3) tasks in_progress at once, across projects; an
        #   in-progress task cannot be unassigned.
        # - Dependencies link tasks of the same project: no self-dependency, no duplicates, no
        #   cycles, no dependency on a cancelled task, and a task in progress cannot gain an
        #   unfinished dependency.
        # - A task cannot be cancelled while tasks that are not done or cancelled depend on it.
        # - Done and cancelled tasks cannot be reassigned, re-dated or re-prioritised.
        # - Due dates are ISO dates and cannot be set in the past.
        # - Titles are 1-120 characters, comments 1-2000 characters, neither blank.
        # - A project can be archived only by its owner or an admin, and only when all its tasks
        #   are done or cancelled.

    def get_project(self, project_id: str) -> dict:
        """Get a project and how many of its tasks are in each status.

        Args:
            project_id (str): The project's id, e.g. "P-01".

        Returns:
            dict: {"success": True, "data": ProjectInfo plus "task_counts"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(project_id, str) or not project_id.strip():
            return {"success": False, "error": "project_id must be a non-empty string."}
        project = self.projects.get(project_id)
        if project is None:
            return {"success": False, "error": f"Project {project_id} not found."}
        counts = {status: 0 for status in self.STATUS_TRANSITIONS}
        for task in self.tasks.values():
            if task.get("project_id") == project_id and task.get("status") in counts:
                counts[task["status"]] += 1
        data = dict(project)
        data["member_ids"] = list(project.get("member_ids", []))
        data["task_counts"] = counts
        return {"success": True, "data": data}

    def list_projects(self, status: Optional[Literal["active", "archived"]] = None) -> dict:
        """List projects.

        Args:
            status (str, optional): "active" or "archived"; omit for all.

        Returns:
            dict: {"success": True, "data": List[ProjectInfo]}, or {"success": False, "error": str}.
        """
        if status is not None and status not in ("active", "archived"):
            return {"success": False, "error": "status must be active or archived."}
        rows = [dict(p) for pid, p in sorted(self.projects.items())
                if status is None or p.get("status") == status]
        return {"success": True, "data": rows}

    def get_user(self, user_id: str) -> dict:
        """Get a user and the projects they belong to.

        Args:
            user_id (str): The user's id, e.g. "U-07".

        Returns:
            dict: {"success": True, "data": UserInfo plus "project_ids"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(user_id, str) or not user_id.strip():
            return {"success": False, "error": "user_id must be a non-empty string."}
        user = self.users.get(user_id)
        if user is None:
            return {"success": False, "error": f"User {user_id} not found."}
        data = dict(user)
        data["project_ids"] = sorted(pid for pid, p in self.projects.items()
                                     if user_id in p.get("member_ids", []))
        return {"success": True, "data": data}

    def find_users(self, query: str) -> dict:
        """Find users by name or email.

        Args:
            query (str): Text to look for (case-insensitive).

        Returns:
            dict: {"success": True, "data": List[UserInfo]} sorted by user_id, or
            {"success": False, "error": str}.
        """
        if not isinstance(query, str):
            return {"success": False, "error": "query must be a string."}
        needle = query.strip().lower()
        if not needle:
            return {"success": False, "error": "query must not be empty."}
        rows = [dict(u) for uid, u in sorted(self.users.items())
                if needle in str(u.get("name", "")).lower() or needle in str(u.get("email", "")).lower()]
        return {"success": True, "data": rows}

    def get_user_workload(self, user_id: str) -> dict:
        """A user's workload.

        Args:
            user_id (str): The user's id.

        Returns:
            dict: {"success": True, "data": {"user_id", "counts", "in_progress", "wip_limit",
            "open_tasks": [{"task_id", "title", "status", "priority", "due_date"}]}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(user_id, str) or not user_id.strip():
            return {"success": False, "error": "user_id must be a non-empty string."}
        if user_id not in self.users:
            return {"success": False, "error": f"User {user_id} not found."}
        counts = {status: 0 for status in self.STATUS_TRANSITIONS}
        open_tasks = []
        for task_id in sorted(self.tasks):
            task = self.tasks[task_id]
            if task.get("assignee_id") != user_id:
                continue
            if task.get("status") in counts:
                counts[task["status"]] += 1
            if task.get("status") not in ("done", "cancelled"):
                open_tasks.append({"task_id": task_id, "title": task.get("title"),
                                   "status": task.get("status"), "priority": task.get("priority"),
                                   "due_date": task.get("due_date")})
        return {"success": True, "data": {"user_id": user_id, "counts": counts,
                                          "in_progress": counts["in_progress"],
                                          "wip_limit": self.WIP_LIMIT, "open_tasks": open_tasks}}

    def list_project_members(self, project_id: str) -> dict:
        """List a project's members.

        Args:
            project_id (str): The project's id.

        Returns:
            dict: {"success": True, "data": List[UserInfo]}, or {"success": False, "error": str}.
        """
        if not isinstance(project_id, str) or not project_id.strip():
            return {"success": False, "error": "project_id must be a non-empty string."}
        project = self.projects.get(project_id)
        if project is None:
            return {"success": False, "error": f"Project {project_id} not found."}
        rows = [dict(self.users[uid]) for uid in project.get("member_ids", []) if uid in self.users]
        return {"success": True, "data": rows}

    def list_tasks(self, project_id: str,
                   status: Optional[Literal["todo", "in_progress", "in_review", "done", "cancelled"]] = None,
                   assignee_id: Optional[str] = None,
                   priority: Optional[Literal["low", "medium", "high", "urgent"]] = None) -> dict:
        """List a project's tasks.

        Args:
            project_id (str): The project's id.
            status (str, optional): Only tasks in this status.
            assignee_id (str, optional): Only tasks assigned to this user.
            priority (str, optional): Only tasks of this priority.

        Returns:
            dict: {"success": True, "data": List[TaskInfo]}, or {"success": False, "error": str}.
        """
        if not isinstance(project_id, str):
            return {"success": False, "error": "project_id must be a string."}
        if status is not None and status not in self.STATUS_TRANSITIONS:
            return {"success": False, "error": "status must be todo, in_progress, in_review, done or cancelled."}
        if assignee_id is not None and not isinstance(assignee_id, str):
            return {"success": False, "error": "assignee_id must be a string or null."}
        if priority is not None and priority not in self.PRIORITIES:
            return {"success": False, "error": "priority must be low, medium, high or urgent."}
        if project_id not in self.projects:
            return {"success": False, "error": f"Project {project_id} not found."}
        rows = []
        for task in self.tasks.values():
            if task.get("project_id") != project_id:
                continue
            if status is not None and task.get("status") != status:
                continue
            if assignee_id is not None and task.get("assignee_id") != assignee_id:
                continue
            if priority is not None and task.get("priority") != priority:
                continue
            row = dict(task)
            row["depends_on"] = list(task.get("depends_on", []))
            rows.append(row)
        number = lambda row: int(str(row["task_id"]).rsplit("-", 1)[-1]) if str(row["task_id"]).rsplit("-", 1)[-1].isdigit() else 0
        rows.sort(key=lambda row: (number(row), str(row["task_id"])))
        return {"success": True, "data": rows}

    def get_task(self, task_id: str) -> dict:
        """Get a task.

        Args:
            task_id (str): The task's id, e.g. "WEB-12".

        Returns:
            dict: {"success": True, "data": TaskInfo plus "comment_count", "blocked_by" and
            "dependents"}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str) or not task_id.strip():
            return {"success": False, "error": "task_id must be a non-empty string."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        data = dict(task)
        data["depends_on"] = list(task.get("depends_on", []))
        data["comment_count"] = sum(1 for c in self.comments.values() if c.get("task_id") == task_id)
        data["blocked_by"] = [dep for dep in task.get("depends_on", [])
                              if self.tasks.get(dep, {}).get("status") != "done"]
        data["dependents"] = sorted(tid for tid, t in self.tasks.items() if task_id in t.get("depends_on", []))
        return {"success": True, "data": data}

    def search_tasks(self, query: str, project_id: Optional[str] = None) -> dict:
        """Search tasks by title and description.

        Args:
            query (str): Text to look for (case-insensitive).
            project_id (str, optional): Only tasks of this project.

        Returns:
            dict: {"success": True, "data": List[TaskInfo]} sorted by task_id, or
            {"success": False, "error": str}.
        """
        if not isinstance(query, str):
            return {"success": False, "error": "query must be a string."}
        if project_id is not None and not isinstance(project_id, str):
            return {"success": False, "error": "project_id must be a string or null."}
        needle = query.strip().lower()
        if not needle:
            return {"success": False, "error": "query must not be empty."}
        if project_id is not None and project_id not in self.projects:
            return {"success": False, "error": f"Project {project_id} not found."}
        rows = []
        for task_id in sorted(self.tasks):
            task = self.tasks[task_id]
            if project_id is not None and task.get("project_id") != project_id:
                continue
            text = f"{task.get('title', '')} {task.get('description', '')}".lower()
            if needle in text:
                row = dict(task)
                row["depends_on"] = list(task.get("depends_on", []))
                rows.append(row)
        return {"success": True, "data": rows}

    def list_overdue_tasks(self, project_id: Optional[str] = None) -> dict:
        """List overdue tasks.

        Args:
            project_id (str, optional): Only tasks of this project.

        Returns:
            dict: {"success": True, "data": [{"task_id", "title", "status", "assignee_id",
            "due_date", "days_overdue"}]}, or {"success": False, "error": str}.
        """
        if project_id is not None and not isinstance(project_id, str):
            return {"success": False, "error": "project_id must be a string or null."}
        if project_id is not None and project_id not in self.projects:
            return {"success": False, "error": f"Project {project_id} not found."}
        today = datetime.now().date()
        rows = []
        for task_id, task in self.tasks.items():
            if project_id is not None and task.get("project_id") != project_id:
                continue
            if task.get("status") in ("done", "cancelled") or not task.get("due_date"):
                continue
            try:
                due = datetime.fromisoformat(str(task["due_date"])).date()
            except ValueError:
                continue
            if due < today:
                rows.append({"task_id": task_id, "title": task.get("title"), "status": task.get("status"),
                             "assignee_id": task.get("assignee_id"), "due_date": task.get("due_date"),
                             "days_overdue": (today - due).days})
        rows.sort(key=lambda row: (str(row["due_date"]), row["task_id"]))
        return {"success": True, "data": rows}

    def get_task_comments(self, task_id: str) -> dict:
        """List a task's comments.

        Args:
            task_id (str): The task's id.

        Returns:
            dict: {"success": True, "data": List[CommentInfo]}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str) or not task_id.strip():
            return {"success": False, "error": "task_id must be a non-empty string."}
        if task_id not in self.tasks:
            return {"success": False, "error": f"Task {task_id} not found."}
        rows = [dict(c) for c in self.comments.values() if c.get("task_id") == task_id]
        rows.sort(key=lambda c: (str(c.get("created_at")), c["comment_id"]))
        return {"success": True, "data": rows}

    def get_task_dependencies(self, task_id: str) -> dict:
        """A task's dependency picture.

        Args:
            task_id (str): The task's id.

        Returns:
            dict: {"success": True, "data": {"task_id", "depends_on": [{"task_id", "title",
            "status"}], "blocking": [task_id], "dependents": [{"task_id", "title", "status"}]}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(task_id, str) or not task_id.strip():
            return {"success": False, "error": "task_id must be a non-empty string."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        depends = []
        for dep in task.get("depends_on", []):
            other = self.tasks.get(dep, {})
            depends.append({"task_id": dep, "title": other.get("title"), "status": other.get("status")})
        dependents = [{"task_id": tid, "title": t.get("title"), "status": t.get("status")}
                      for tid, t in sorted(self.tasks.items()) if task_id in t.get("depends_on", [])]
        return {"success": True, "data": {"task_id": task_id, "depends_on": depends,
                                          "blocking": [d["task_id"] for d in depends if d["status"] != "done"],
                                          "dependents": dependents}}

    def create_task(self, project_id: str, reporter_id: str, title: str, description: str = "",
                    priority: Literal["low", "medium", "high", "urgent"] = "medium",
                    assignee_id: Optional[str] = None, due_date: Optional[str] = None) -> dict:
        """Create a task.

        Args:
            project_id (str): The project (must be active).
            reporter_id (str): Who files it (an active, non-viewer project member).
            title (str): 1-120 characters.
            description (str): Optional details.
            priority (str): "low", "medium", "high" or "urgent".
            assignee_id (str, optional): An active, non-viewer project member.
            due_date (str, optional): ISO date (YYYY-MM-DD), today or later.

        Returns:
            dict: {"success": True, "message": str, "data": {"task_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("project_id", project_id), ("reporter_id", reporter_id),
                             ("title", title), ("description", description), ("priority", priority)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        if assignee_id is not None and not isinstance(assignee_id, str):
            return {"success": False, "error": "assignee_id must be a string or null."}
        if due_date is not None and not isinstance(due_date, str):
            return {"success": False, "error": "due_date must be an ISO date string or null."}
        project = self.projects.get(project_id)
        if project is None:
            return {"success": False, "error": f"Project {project_id} not found."}
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {project_id} is archived."}
        members = project.get("member_ids", [])
        reporter = self.users.get(reporter_id)
        if reporter is None or reporter_id not in members or reporter.get("status") != "active":
            return {"success": False, "error": f"{reporter_id} is not an active member of {project_id}."}
        if reporter.get("role") == "viewer":
            return {"success": False, "error": "Viewers cannot create tasks."}
        if not title.strip() or len(title.strip()) > self.MAX_TITLE_LENGTH:
            return {"success": False, "error": f"The title must be 1-{self.MAX_TITLE_LENGTH} characters."}
        if priority not in self.PRIORITIES:
            return {"success": False, "error": "priority must be low, medium, high or urgent."}
        if assignee_id is not None:
            assignee = self.users.get(assignee_id)
            if assignee is None or assignee_id not in members or assignee.get("status") != "active":
                return {"success": False, "error": f"{assignee_id} is not an active member of {project_id}."}
            if assignee.get("role") == "viewer":
                return {"success": False, "error": f"{assignee_id} is a viewer and cannot be assigned tasks."}
        if due_date is not None:
            try:
                due = datetime.strptime(due_date.strip(), "%Y-%m-%d").date()
            except ValueError:
                return {"success": False, "error": "due_date must be an ISO date (YYYY-MM-DD)."}
            if due < datetime.now().date():
                return {"success": False, "error": "due_date cannot be in the past."}
            due_date = due.isoformat()
        key = project.get("key") or project_id
        number = sum(1 for t in self.tasks.values() if t.get("project_id") == project_id) + 1
        while f"{key}-{number}" in self.tasks:
            number += 1
        task_id = f"{key}-{number}"
        now = datetime.now().replace(microsecond=0).isoformat()
        self.tasks[task_id] = {
            "task_id": task_id, "project_id": project_id, "title": title.strip(),
            "description": description.strip(), "status": "todo", "priority": priority,
            "assignee_id": assignee_id, "reporter_id": reporter_id, "due_date": due_date,
            "depends_on": [], "created_at": now, "updated_at": now, "completed_at": None}
        return {"success": True, "message": f"Task {task_id} created in {project_id}.",
                "data": {"task_id": task_id}}

    def update_task_status(self, task_id: str,
                           new_status: Literal["todo", "in_progress", "in_review", "done", "cancelled"]) -> dict:
        """Change a task's status.

        Args:
            task_id (str): The task.
            new_status (str): "todo", "in_progress", "in_review", "done" or "cancelled".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str) or not isinstance(new_status, str):
            return {"success": False, "error": "task_id and new_status must be strings."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        if new_status not in self.STATUS_TRANSITIONS:
            return {"success": False, "error": "new_status must be todo, in_progress, in_review, done or cancelled."}
        project = self.projects.get(task.get("project_id"), {})
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {task.get('project_id')} is archived."}
        current = task.get("status")
        if new_status == current:
            return {"success": False, "error": f"{task_id} is already {current}."}
        if new_status not in self.STATUS_TRANSITIONS.get(current, []):
            allowed = ", ".join(self.STATUS_TRANSITIONS.get(current, [])) or "nothing"
            return {"success": False, "error": f"{task_id} cannot go from {current} to {new_status}; allowed: {allowed}."}
        if new_status == "in_progress":
            assignee_id = task.get("assignee_id")
            if not assignee_id:
                return {"success": False, "error": f"{task_id} needs an assignee before work starts."}
            blocking = [dep for dep in task.get("depends_on", []) if self.tasks.get(dep, {}).get("status") != "done"]
            if blocking:
                return {"success": False, "error": f"{task_id} is blocked by unfinished tasks: {', '.join(blocking)}."}
            busy = sum(1 for tid, t in self.tasks.items() if tid != task_id
                       and t.get("assignee_id") == assignee_id and t.get("status") == "in_progress")
            if busy >= self.WIP_LIMIT:
                return {"success": False, "error": f"{assignee_id} already has {busy} tasks in progress (limit {self.WIP_LIMIT})."}
        if new_status == "cancelled":
            open_dependents = sorted(tid for tid, t in self.tasks.items() if task_id in t.get("depends_on", [])
                                     and t.get("status") not in ("done", "cancelled"))
            if open_dependents:
                return {"success": False, "error": f"{task_id} cannot be cancelled while open tasks depend on it ({', '.join(open_dependents)}); remove the dependency first."}
        now = datetime.now().replace(microsecond=0).isoformat()
        task["status"] = new_status
        task["updated_at"] = now
        task["completed_at"] = now if new_status == "done" else None
        return {"success": True, "message": f"{task_id} moved from {current} to {new_status}."}

    def assign_task(self, task_id: str, assignee_id: Optional[str]) -> dict:
        """Assign or unassign a task.

        Args:
            task_id (str): The task.
            assignee_id (str, optional): The new assignee, or null to unassign.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str):
            return {"success": False, "error": "task_id must be a string."}
        if assignee_id is not None and not isinstance(assignee_id, str):
            return {"success": False, "error": "assignee_id must be a string or null."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        project = self.projects.get(task.get("project_id"), {})
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {task.get('project_id')} is archived."}
        if task.get("status") in ("done", "cancelled"):
            return {"success": False, "error": f"{task_id} is {task.get('status')} and cannot be reassigned."}
        if assignee_id is None:
            if task.get("status") == "in_progress":
                return {"success": False, "error": f"{task_id} is in progress; move it back to todo before unassigning it."}
            task["assignee_id"] = None
            task["updated_at"] = datetime.now().replace(microsecond=0).isoformat()
            return {"success": True, "message": f"{task_id} is now unassigned."}
        user = self.users.get(assignee_id)
        if user is None or assignee_id not in project.get("member_ids", []) or user.get("status") != "active":
            return {"success": False, "error": f"{assignee_id} is not an active member of {task.get('project_id')}."}
        if user.get("role") == "viewer":
            return {"success": False, "error": f"{assignee_id} is a viewer and cannot be assigned tasks."}
        if task.get("assignee_id") == assignee_id:
            return {"success": False, "error": f"{task_id} is already assigned to {assignee_id}."}
        if task.get("status") == "in_progress":
            busy = sum(1 for t in self.tasks.values()
                       if t.get("assignee_id") == assignee_id and t.get("status") == "in_progress")
            if busy >= self.WIP_LIMIT:
                return {"success": False, "error": f"{assignee_id} already has {busy} tasks in progress (limit {self.WIP_LIMIT})."}
        task["assignee_id"] = assignee_id
        task["updated_at"] = datetime.now().replace(microsecond=0).isoformat()
        return {"success": True, "message": f"{task_id} assigned to {assignee_id}."}

    def set_due_date(self, task_id: str, due_date: Optional[str]) -> dict:
        """Set or clear a task's due date.

        Args:
            task_id (str): The task.
            due_date (str, optional): ISO date (YYYY-MM-DD), today or later; null clears it.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str):
            return {"success": False, "error": "task_id must be a string."}
        if due_date is not None and not isinstance(due_date, str):
            return {"success": False, "error": "due_date must be an ISO date string or null."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        project = self.projects.get(task.get("project_id"), {})
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {task.get('project_id')} is archived."}
        if task.get("status") in ("done", "cancelled"):
            return {"success": False, "error": f"{task_id} is {task.get('status')}."}
        value = None
        if due_date is not None:
            try:
                due = datetime.strptime(due_date.strip(), "%Y-%m-%d").date()
            except ValueError:
                return {"success": False, "error": "due_date must be an ISO date (YYYY-MM-DD)."}
            if due < datetime.now().date():
                return {"success": False, "error": "due_date cannot be in the past."}
            value = due.isoformat()
        task["due_date"] = value
        task["updated_at"] = datetime.now().replace(microsecond=0).isoformat()
        return {"success": True, "message": f"Due date of {task_id} set to {value}." if value else f"Due date of {task_id} cleared."}

    def set_task_priority(self, task_id: str, priority: Literal["low", "medium", "high", "urgent"]) -> dict:
        """Change a task's priority.

        Args:
            task_id (str): The task.
            priority (str): "low", "medium", "high" or "urgent".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str) or not isinstance(priority, str):
            return {"success": False, "error": "task_id and priority must be strings."}
        if priority not in self.PRIORITIES:
            return {"success": False, "error": "priority must be low, medium, high or urgent."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        project = self.projects.get(task.get("project_id"), {})
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {task.get('project_id')} is archived."}
        if task.get("status") in ("done", "cancelled"):
            return {"success": False, "error": f"{task_id} is {task.get('status')}."}
        task["priority"] = priority
        task["updated_at"] = datetime.now().replace(microsecond=0).isoformat()
        return {"success": True, "message": f"Priority of {task_id} set to {priority}."}

    def add_comment(self, task_id: str, author_id: str, body: str) -> dict:
        """Comment on a task.

        Args:
            task_id (str): The task.
            author_id (str): An active member of the task's project.
            body (str): 1-2000 characters, not blank.

        Returns:
            dict: {"success": True, "message": str, "data": {"comment_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("task_id", task_id), ("author_id", author_id), ("body", body)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        project = self.projects.get(task.get("project_id"), {})
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {task.get('project_id')} is archived."}
        author = self.users.get(author_id)
        if author is None or author_id not in project.get("member_ids", []) or author.get("status") != "active":
            return {"success": False, "error": f"{author_id} is not an active member of {task.get('project_id')}."}
        if not body.strip() or len(body) > self.MAX_COMMENT_LENGTH:
            return {"success": False, "error": f"Comments must be 1-{self.MAX_COMMENT_LENGTH} characters."}
        number = len(self.comments) + 1
        while f"C-{number:04d}" in self.comments:
            number += 1
        comment_id = f"C-{number:04d}"
        self.comments[comment_id] = {"comment_id": comment_id, "task_id": task_id, "author_id": author_id,
                                     "body": body.strip(),
                                     "created_at": datetime.now().replace(microsecond=0).isoformat()}
        return {"success": True, "message": f"Comment {comment_id} added to {task_id}.",
                "data": {"comment_id": comment_id}}

    def add_dependency(self, task_id: str, depends_on_id: str) -> dict:
        """Make task_id depend on depends_on_id.

        Args:
            task_id (str): The dependent task.
            depends_on_id (str): The task that must be done first.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str) or not isinstance(depends_on_id, str):
            return {"success": False, "error": "task_id and depends_on_id must be strings."}
        task = self.tasks.get(task_id)
        other = self.tasks.get(depends_on_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        if other is None:
            return {"success": False, "error": f"Task {depends_on_id} not found."}
        if task_id == depends_on_id:
            return {"success": False, "error": "A task cannot depend on itself."}
        if task.get("project_id") != other.get("project_id"):
            return {"success": False, "error": "Dependencies must link tasks of the same project."}
        project = self.projects.get(task.get("project_id"), {})
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {task.get('project_id')} is archived."}
        if task.get("status") in ("done", "cancelled"):
            return {"success": False, "error": f"{task_id} is {task.get('status')}."}
        if other.get("status") == "cancelled":
            return {"success": False, "error": f"{depends_on_id} is cancelled and cannot be a prerequisite."}
        if depends_on_id in task.get("depends_on", []):
            return {"success": False, "error": f"{task_id} already depends on {depends_on_id}."}
        if task.get("status") == "in_progress" and other.get("status") != "done":
            return {"success": False, "error": f"{task_id} is in progress and cannot gain the unfinished prerequisite {depends_on_id}."}
        stack, seen = [depends_on_id], set()
        while stack:
            current = stack.pop()
            if current == task_id:
                return {"success": False, "error": f"Adding {depends_on_id} as a prerequisite of {task_id} would create a cycle."}
            if current in seen:
                continue
            seen.add(current)
            stack.extend(self.tasks.get(current, {}).get("depends_on", []))
        task.setdefault("depends_on", []).append(depends_on_id)
        task["updated_at"] = datetime.now().replace(microsecond=0).isoformat()
        return {"success": True, "message": f"{task_id} now depends on {depends_on_id}."}

    def remove_dependency(self, task_id: str, depends_on_id: str) -> dict:
        """Remove the dependency of task_id on depends_on_id.

        Args:
            task_id (str): The dependent task.
            depends_on_id (str): The prerequisite to remove.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(task_id, str) or not isinstance(depends_on_id, str):
            return {"success": False, "error": "task_id and depends_on_id must be strings."}
        task = self.tasks.get(task_id)
        if task is None:
            return {"success": False, "error": f"Task {task_id} not found."}
        project = self.projects.get(task.get("project_id"), {})
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {task.get('project_id')} is archived."}
        if depends_on_id not in task.get("depends_on", []):
            return {"success": False, "error": f"{task_id} does not depend on {depends_on_id}."}
        task["depends_on"] = [dep for dep in task.get("depends_on", []) if dep != depends_on_id]
        task["updated_at"] = datetime.now().replace(microsecond=0).isoformat()
        return {"success": True, "message": f"{task_id} no longer depends on {depends_on_id}."}

    def add_project_member(self, project_id: str, user_id: str) -> dict:
        """Add a user to a project.

        Args:
            project_id (str): The project (must be active).
            user_id (str): An active user.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(project_id, str) or not isinstance(user_id, str):
            return {"success": False, "error": "project_id and user_id must be strings."}
        project = self.projects.get(project_id)
        if project is None:
            return {"success": False, "error": f"Project {project_id} not found."}
        if project.get("status") != "active":
            return {"success": False, "error": f"Project {project_id} is archived."}
        user = self.users.get(user_id)
        if user is None:
            return {"success": False, "error": f"User {user_id} not found."}
        if user.get("status") != "active":
            return {"success": False, "error": f"User {user_id} is inactive."}
        if user_id in project.get("member_ids", []):
            return {"success": False, "error": f"{user_id} is already a member of {project_id}."}
        project.setdefault("member_ids", []).append(user_id)
        return {"success": True, "message": f"{user_id} added to {project_id}."}

    def archive_project(self, project_id: str, actor_id: str) -> dict:
        """Archive a project.

        Args:
            project_id (str): The project.
            actor_id (str): The project's owner or an admin.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(project_id, str) or not isinstance(actor_id, str):
            return {"success": False, "error": "project_id and actor_id must be strings."}
        project = self.projects.get(project_id)
        if project is None:
            return {"success": False, "error": f"Project {project_id} not found."}
        if project.get("status") == "archived":
            return {"success": False, "error": f"Project {project_id} is already archived."}
        actor = self.users.get(actor_id)
        if actor is None or actor.get("status") != "active":
            return {"success": False, "error": f"User {actor_id} cannot act."}
        if project.get("owner_id") != actor_id and actor.get("role") != "admin":
            return {"success": False, "error": "Only the project's owner or an admin can archive it."}
        still_open = sorted(tid for tid, t in self.tasks.items() if t.get("project_id") == project_id
                            and t.get("status") not in ("done", "cancelled"))
        if still_open:
            return {"success": False, "error": f"{project_id} still has open tasks: {', '.join(still_open)}."}
        project["status"] = "archived"
        return {"success": True, "message": f"Project {project_id} archived."}
