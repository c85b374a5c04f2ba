from datetime import date, datetime, timedelta
from typing import Dict, Literal, Optional, TypedDict


class DepartmentInfo(TypedDict):
    department_id: str
    name: str
    head_employee_id: Optional[str]  # the department head, None when vacant
    headcount_limit: int  # most non-terminated employees the department may have
    status: str  # "active" | "closed"


class EmployeeInfo(TypedDict):
    employee_id: str
    full_name: str
    email: str  # work email, unique
    phone: str
    department_id: str
    manager_id: Optional[str]  # direct manager, None for the top of the hierarchy
    job_title: str
    job_level: int  # 1 (entry) to 8 (executive)
    salary: float  # annual base salary
    hire_date: str  # ISO date
    status: str  # "active" | "on_leave" | "terminated"
    termination_date: Optional[str]  # ISO date, None unless terminated
    annual_leave_balance: float  # days
    sick_leave_balance: float  # days


class LeaveRequestInfo(TypedDict):
    request_id: str
    employee_id: str
    leave_type: str  # "annual" | "sick" | "unpaid"
    start_date: str  # ISO date
    end_date: str  # ISO date, inclusive
    days: int  # working days (Monday to Friday) in the period
    reason: str
    status: str  # "pending" | "approved" | "rejected" | "cancelled"
    approver_id: Optional[str]  # who decided, None while pending
    decided_at: Optional[str]  # ISO date-time of the decision
    decision_note: Optional[str]
    submitted_at: str  # ISO date-time


class JobChangeInfo(TypedDict):
    change_id: str
    employee_id: str
    change_type: str  # "hire" | "title_change" | "level_change" | "salary_change" | "transfer" | "manager_change" | "termination" | "leave_adjustment"
    effective_date: str  # ISO date
    old_value: str
    new_value: str
    note: str
    recorded_at: str  # ISO date-time


class HRRecordsSystem:
    MIN_LEVEL = 1
    MAX_LEVEL = 8
    MAX_SALARY_CHANGE = 0.20
    MAX_UNPAID_DAYS = 20
    MAX_REQUEST_DAYS = 30
    MAX_BALANCE_ADJUSTMENT = 30.0
    NEW_HIRE_ANNUAL_DAYS = 20.0
    NEW_HIRE_SICK_DAYS = 10.0

    def __init__(self, init_config: dict):
        # Departments, by department_id.
        self.departments: Dict[str, DepartmentInfo] = {}
        # Employees (current and former), by employee_id.
        self.employees: Dict[str, EmployeeInfo] = {}
        # Leave requests, by request_id.
        self.leave_requests: Dict[str, LeaveRequestInfo] = {}
        # Employment history entries, by change_id.
        self.job_changes: Dict[str, JobChangeInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - Every employee belongs to an existing department; hires and transfers go only to
        #   active departments, and a department's non-terminated employees may not exceed its
        #   headcount_limit.
        # - A manager is a non-terminated employee other than the employee, and the reporting
        #   line may not form a cycle.
        # - Work emails are unique (case-insensitive).
        # - Leave days are the working days (Monday-Friday) from start to end inclusive; a
        #   request may not start before today, end before it starts, or exceed 30 working days.
        # - Annual and sick requests may not exceed the balance minus the days already pending of
        #   that type; the balance is deducted on approval and restored when approved leave that
        #   has not started is cancelled. Unpaid leave is at most 20 working days per request.
        # - An employee's pending or approved leave requests may not overlap.
        # - Only pending requests can be approved or rejected, by the employee's direct manager;
        #   when there is no manager or the manager is not active, the department head decides.
        #   A rejection needs a note.
        # - Only pending requests, or approved ones that have not started, can be cancelled.
        # - Terminated employees cannot request leave, decide requests, manage or head a
        #   department. Termination is refused while the employee still manages non-terminated
        #   employees; it needs a date on or after the hire date, cancels the employee's open
        #   leave and vacates a department headship.
        # - One job change moves the level by at most one step (levels 1-8) and the salary by at
        #   most 20%; salaries are positive.
        # - Leave balance adjustments are between -30 and +30 days and never leave a negative
        #   balance.
        # - Hires, job changes, transfers, manager changes, terminations and balance adjustments
        #   are logged as job change records.

    def get_employee(self, employee_id: str) -> dict:
        """Get an employee's record by employee id.

        Args:
            employee_id (str): The employee id, e.g. "E-1001".

        Returns:
            dict: {"success": True, "data": employee record}, or {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        return {"success": True, "data": dict(employee)}

    def find_employees(self, name: str, include_terminated: bool = False) -> dict:
        """Find employees whose full name contains the given text (case-insensitive).

        Args:
            name (str): Part of the name, e.g. "Okafor".
            include_terminated (bool): Also return former employees (default False).

        Returns:
            dict: {"success": True, "data": [employee records]} sorted by employee id, or
            {"success": False, "error": str}.
        """
        if not isinstance(name, str) or not name.strip():
            return {"success": False, "error": "name must be a non-empty string."}
        if not isinstance(include_terminated, bool):
            return {"success": False, "error": "include_terminated must be a boolean."}
        needle = name.strip().lower()
        found = [dict(employee) for employee_id, employee in sorted(self.employees.items())
                 if needle in str(employee.get("full_name", "")).lower()
                 and (include_terminated or employee.get("status") != "terminated")]
        return {"success": True, "data": found}

    def list_department_employees(self, department_id: str, include_terminated: bool = False) -> dict:
        """List the employees of a department.

        Args:
            department_id (str): The department id, e.g. "D-ENG".
            include_terminated (bool): Also list former employees (default False).

        Returns:
            dict: {"success": True, "data": [employee records]} sorted by employee id, or
            {"success": False, "error": str}.
        """
        if not isinstance(department_id, str) or not department_id.strip():
            return {"success": False, "error": "department_id must be a non-empty string."}
        if not isinstance(include_terminated, bool):
            return {"success": False, "error": "include_terminated must be a boolean."}
        if department_id not in self.departments:
            return {"success": False, "error": f"Department {department_id} not found."}
        found = [dict(employee) for employee_id, employee in sorted(self.employees.items())
                 if employee.get("department_id") == department_id
                 and (include_terminated or employee.get("status") != "terminated")]
        return {"success": True, "data": found}

    def list_direct_reports(self, manager_id: str) -> dict:
        """List the non-terminated employees who report directly to a manager.

        Args:
            manager_id (str): The manager's employee id.

        Returns:
            dict: {"success": True, "data": [employee records]} sorted by employee id, or
            {"success": False, "error": str}.
        """
        if not isinstance(manager_id, str) or not manager_id.strip():
            return {"success": False, "error": "manager_id must be a non-empty string."}
        if manager_id not in self.employees:
            return {"success": False, "error": f"Employee {manager_id} not found."}
        found = [dict(employee) for employee_id, employee in sorted(self.employees.items())
                 if employee.get("manager_id") == manager_id
                 and employee.get("status") != "terminated"]
        return {"success": True, "data": found}

    def get_department(self, department_id: str) -> dict:
        """Get a department with its current headcount and free places.

        Args:
            department_id (str): The department id.

        Returns:
            dict: {"success": True, "data": department record plus "headcount" and
            "open_positions"}, or {"success": False, "error": str}.
        """
        if not isinstance(department_id, str) or not department_id.strip():
            return {"success": False, "error": "department_id must be a non-empty string."}
        department = self.departments.get(department_id)
        if department is None:
            return {"success": False, "error": f"Department {department_id} not found."}
        headcount = sum(1 for employee in self.employees.values()
                        if employee.get("department_id") == department_id
                        and employee.get("status") != "terminated")
        data = dict(department)
        data["headcount"] = headcount
        data["open_positions"] = max(department.get("headcount_limit", 0) - headcount, 0)
        return {"success": True, "data": data}

    def list_departments(self, status: Optional[str] = None) -> dict:
        """List departments, optionally only those with a given status.

        Args:
            status (Optional[str]): "active" or "closed"; None for all.

        Returns:
            dict: {"success": True, "data": [department records with "headcount"]} sorted by id,
            or {"success": False, "error": str}.
        """
        if status is not None and (not isinstance(status, str) or status not in ("active", "closed")):
            return {"success": False, "error": "status must be active or closed."}
        found = []
        for department_id, department in sorted(self.departments.items()):
            if status is not None and department.get("status") != status:
                continue
            data = dict(department)
            data["headcount"] = sum(1 for employee in self.employees.values()
                                    if employee.get("department_id") == department_id
                                    and employee.get("status") != "terminated")
            found.append(data)
        return {"success": True, "data": found}

    def get_leave_balance(self, employee_id: str) -> dict:
        """Get an employee's leave balances and the days already requested but still pending.

        Args:
            employee_id (str): The employee id.

        Returns:
            dict: {"success": True, "data": {"employee_id", "annual_leave_balance",
            "sick_leave_balance", "pending_annual_days", "pending_sick_days",
            "available_annual_days", "available_sick_days"}}, or {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        pending = {"annual": 0, "sick": 0}
        for request in self.leave_requests.values():
            if request.get("employee_id") == employee_id and request.get("status") == "pending" \
                    and request.get("leave_type") in pending:
                pending[request["leave_type"]] += int(request.get("days", 0))
        return {"success": True, "data": {
            "employee_id": employee_id,
            "annual_leave_balance": employee.get("annual_leave_balance", 0.0),
            "sick_leave_balance": employee.get("sick_leave_balance", 0.0),
            "pending_annual_days": pending["annual"], "pending_sick_days": pending["sick"],
            "available_annual_days": employee.get("annual_leave_balance", 0.0) - pending["annual"],
            "available_sick_days": employee.get("sick_leave_balance", 0.0) - pending["sick"]}}

    def list_leave_requests(self, employee_id: Optional[str] = None, status: Optional[str] = None,
                            department_id: Optional[str] = None) -> dict:
        """List leave requests, filtered by employee, status and/or the employee's department.

        Args:
            employee_id (Optional[str]): Only this employee's requests; None for everyone.
            status (Optional[str]): "pending", "approved", "rejected" or "cancelled"; None for all.
            department_id (Optional[str]): Only requests of employees in this department.

        Returns:
            dict: {"success": True, "data": [leave request records]} by start date, or
            {"success": False, "error": str}.
        """
        if employee_id is not None and not isinstance(employee_id, str):
            return {"success": False, "error": "employee_id must be a string."}
        if status is not None and (not isinstance(status, str) or status not in
                                   ("pending", "approved", "rejected", "cancelled")):
            return {"success": False,
                    "error": "status must be pending, approved, rejected or cancelled."}
        if department_id is not None and not isinstance(department_id, str):
            return {"success": False, "error": "department_id must be a string."}
        if employee_id is not None and employee_id not in self.employees:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        if department_id is not None and department_id not in self.departments:
            return {"success": False, "error": f"Department {department_id} not found."}
        found = []
        for request in self.leave_requests.values():
            if employee_id is not None and request.get("employee_id") != employee_id:
                continue
            if status is not None and request.get("status") != status:
                continue
            if department_id is not None and self.employees.get(
                    request.get("employee_id"), {}).get("department_id") != department_id:
                continue
            found.append(dict(request))
        found.sort(key=lambda request: (request.get("start_date", ""), request.get("request_id", "")))
        return {"success": True, "data": found}

    def get_leave_request(self, request_id: str) -> dict:
        """Get a leave request by id.

        Args:
            request_id (str): The request id, e.g. "LR-0001".

        Returns:
            dict: {"success": True, "data": leave request record}, or
            {"success": False, "error": str}.
        """
        if not isinstance(request_id, str) or not request_id.strip():
            return {"success": False, "error": "request_id must be a non-empty string."}
        request = self.leave_requests.get(request_id)
        if request is None:
            return {"success": False, "error": f"Leave request {request_id} not found."}
        return {"success": True, "data": dict(request)}

    def get_job_history(self, employee_id: str) -> dict:
        """List an employee's employment history (job change records), oldest first.

        Args:
            employee_id (str): The employee id.

        Returns:
            dict: {"success": True, "data": [job change records]}, or
            {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        if employee_id not in self.employees:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        found = [dict(change) for change in self.job_changes.values()
                 if change.get("employee_id") == employee_id]
        found.sort(key=lambda change: (change.get("effective_date", ""),
                                       change.get("recorded_at", ""), change.get("change_id", "")))
        return {"success": True, "data": found}

    def get_reporting_chain(self, employee_id: str) -> dict:
        """List an employee's managers from the direct manager up to the top of the hierarchy.

        Args:
            employee_id (str): The employee id.

        Returns:
            dict: {"success": True, "data": [{"employee_id", "full_name", "job_title",
            "status"}]} (direct manager first), or {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        chain = []
        seen = {employee_id}
        current = employee.get("manager_id")
        while current and current not in seen and len(chain) < 20:
            seen.add(current)
            manager = self.employees.get(current)
            if manager is None:
                break
            chain.append({"employee_id": current, "full_name": manager.get("full_name"),
                          "job_title": manager.get("job_title"), "status": manager.get("status")})
            current = manager.get("manager_id")
        return {"success": True, "data": chain}

    def hire_employee(self, full_name: str, email: str, phone: str, department_id: str,
                      job_title: str, job_level: int, salary: float, hire_date: str,
                      manager_id: Optional[str] = None) -> dict:
        """Hire a new employee into an active department with a free place. New hires start with
        20 annual and 10 sick leave days. The new id is "EMP-" followed by the next free
        four-digit number.

        Args:
            full_name (str): The employee's full name.
            email (str): Work email, unique.
            phone (str): Phone number.
            department_id (str): The department to join (active, below its headcount limit).
            job_title (str): Job title, e.g. "Data Analyst".
            job_level (int): Level from 1 to 8.
            salary (float): Annual base salary, positive.
            hire_date (str): Start date, ISO format YYYY-MM-DD.
            manager_id (Optional[str]): Direct manager; None means the department head.

        Returns:
            dict: {"success": True, "message": str, "data": {"employee_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("full_name", full_name), ("email", email), ("phone", phone),
                             ("department_id", department_id), ("job_title", job_title),
                             ("hire_date", hire_date)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        if isinstance(job_level, bool) or not isinstance(job_level, int):
            return {"success": False, "error": "job_level must be an integer."}
        if isinstance(salary, bool) or not isinstance(salary, (int, float)):
            return {"success": False, "error": "salary must be a number."}
        if manager_id is not None and not isinstance(manager_id, str):
            return {"success": False, "error": "manager_id must be a string."}
        if "@" not in email:
            return {"success": False, "error": "email must be an email address."}
        if not self.MIN_LEVEL <= job_level <= self.MAX_LEVEL:
            return {"success": False, "error": "job_level must be between 1 and 8."}
        if salary <= 0:
            return {"success": False, "error": "salary must be positive."}
        try:
            date.fromisoformat(hire_date)
        except ValueError:
            return {"success": False, "error": "hire_date must be an ISO date (YYYY-MM-DD)."}
        department = self.departments.get(department_id)
        if department is None:
            return {"success": False, "error": f"Department {department_id} not found."}
        if department.get("status") != "active":
            return {"success": False, "error": f"Department {department_id} is closed."}
        headcount = sum(1 for employee in self.employees.values()
                        if employee.get("department_id") == department_id
                        and employee.get("status") != "terminated")
        if headcount >= department.get("headcount_limit", 0):
            return {"success": False, "error": f"Department {department_id} is at its headcount "
                    f"limit of {department.get('headcount_limit', 0)}."}
        wanted = email.strip().lower()
        if any(str(employee.get("email", "")).lower() == wanted for employee in self.employees.values()):
            return {"success": False, "error": f"The email {email.strip()} is already in use."}
        if manager_id is None:
            manager_id = department.get("head_employee_id")
        if manager_id is not None:
            manager = self.employees.get(manager_id)
            if manager is None:
                return {"success": False, "error": f"Manager {manager_id} not found."}
            if manager.get("status") == "terminated":
                return {"success": False, "error": f"Manager {manager_id} is terminated."}
        number = len(self.employees) + 1
        while f"EMP-{number:04d}" in self.employees:
            number += 1
        employee_id = f"EMP-{number:04d}"
        self.employees[employee_id] = {
            "employee_id": employee_id, "full_name": full_name.strip(), "email": email.strip(),
            "phone": phone.strip(), "department_id": department_id, "manager_id": manager_id,
            "job_title": job_title.strip(), "job_level": job_level,
            "salary": round(float(salary), 2), "hire_date": hire_date, "status": "active",
            "termination_date": None, "annual_leave_balance": self.NEW_HIRE_ANNUAL_DAYS,
            "sick_leave_balance": self.NEW_HIRE_SICK_DAYS}
        count = len(self.job_changes) + 1
        while f"JC-{count:04d}" in self.job_changes:
            count += 1
        change_id = f"JC-{count:04d}"
        self.job_changes[change_id] = {
            "change_id": change_id, "employee_id": employee_id, "change_type": "hire",
            "effective_date": hire_date, "old_value": "",
            "new_value": f"{job_title.strip()} (level {job_level}) in {department_id}",
            "note": "New hire", "recorded_at": datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")}
        return {"success": True, "message": f"Hired {full_name.strip()} as {employee_id}.",
                "data": {"employee_id": employee_id}}

    def submit_leave_request(self, employee_id: str, leave_type: Literal["annual", "sick", "unpaid"],
                             start_date: str, end_date: str, reason: str = "") -> dict:
        """Submit a leave request for an employee; it starts pending. The new id is "LR-"
        followed by the next free four-digit number.

        Args:
            employee_id (str): The employee id (not terminated).
            leave_type (str): "annual", "sick" or "unpaid".
            start_date (str): First day of leave, ISO date, not before today.
            end_date (str): Last day of leave, ISO date, on or after start_date.
            reason (str): Optional reason.

        Returns:
            dict: {"success": True, "message": str, "data": {"request_id", "days"}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        if not isinstance(leave_type, str) or leave_type not in ("annual", "sick", "unpaid"):
            return {"success": False, "error": "leave_type must be annual, sick or unpaid."}
        if not isinstance(start_date, str) or not isinstance(end_date, str):
            return {"success": False, "error": "start_date and end_date must be ISO date strings."}
        if not isinstance(reason, str):
            return {"success": False, "error": "reason must be a string."}
        try:
            start = date.fromisoformat(start_date)
            end = date.fromisoformat(end_date)
        except ValueError:
            return {"success": False, "error": "start_date and end_date must be ISO dates (YYYY-MM-DD)."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        if employee.get("status") == "terminated":
            return {"success": False, "error": f"Employee {employee_id} is terminated."}
        today = datetime.now().date()
        if start < today:
            return {"success": False, "error": f"Leave cannot start in the past (today is {today.isoformat()})."}
        if end < start:
            return {"success": False, "error": "end_date is before start_date."}
        days = 0
        current = start
        while current <= end:
            if current.weekday() < 5:
                days += 1
            current += timedelta(days=1)
        if days == 0:
            return {"success": False, "error": "The period contains no working days."}
        if days > self.MAX_REQUEST_DAYS:
            return {"success": False, "error": f"A request may cover at most {self.MAX_REQUEST_DAYS} working days."}
        if leave_type == "unpaid" and days > self.MAX_UNPAID_DAYS:
            return {"success": False, "error": f"Unpaid leave is limited to {self.MAX_UNPAID_DAYS} working days per request."}
        for request in self.leave_requests.values():
            if request.get("employee_id") != employee_id or request.get("status") not in ("pending", "approved"):
                continue
            if str(request.get("start_date")) <= end.isoformat() and str(request.get("end_date")) >= start.isoformat():
                return {"success": False, "error": f"The period overlaps leave request {request['request_id']} "
                        f"({request['start_date']} to {request['end_date']})."}
        if leave_type in ("annual", "sick"):
            field = "annual_leave_balance" if leave_type == "annual" else "sick_leave_balance"
            pending = sum(int(request.get("days", 0)) for request in self.leave_requests.values()
                          if request.get("employee_id") == employee_id and request.get("status") == "pending"
                          and request.get("leave_type") == leave_type)
            available = float(employee.get(field, 0.0)) - pending
            if days > available:
                return {"success": False, "error": f"Not enough {leave_type} leave: {days} days requested, "
                        f"{available:g} available (balance {employee.get(field, 0.0):g}, {pending} pending)."}
        number = len(self.leave_requests) + 1
        while f"LR-{number:04d}" in self.leave_requests:
            number += 1
        request_id = f"LR-{number:04d}"
        self.leave_requests[request_id] = {
            "request_id": request_id, "employee_id": employee_id, "leave_type": leave_type,
            "start_date": start.isoformat(), "end_date": end.isoformat(), "days": days,
            "reason": reason.strip(), "status": "pending", "approver_id": None, "decided_at": None,
            "decision_note": None, "submitted_at": datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")}
        return {"success": True, "message": f"Leave request {request_id} submitted for {days} working day(s).",
                "data": {"request_id": request_id, "days": days}}

    def approve_leave_request(self, request_id: str, approver_id: str, note: str = "") -> dict:
        """Approve a pending leave request and deduct annual or sick days from the balance. The
        approver must be the employee's direct manager, or the department head when the employee
        has no active manager.

        Args:
            request_id (str): The pending request's id.
            approver_id (str): The deciding manager's employee id.
            note (str): Optional note for the employee.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(request_id, str) or not request_id.strip():
            return {"success": False, "error": "request_id must be a non-empty string."}
        if not isinstance(approver_id, str) or not approver_id.strip():
            return {"success": False, "error": "approver_id must be a non-empty string."}
        if not isinstance(note, str):
            return {"success": False, "error": "note must be a string."}
        request = self.leave_requests.get(request_id)
        if request is None:
            return {"success": False, "error": f"Leave request {request_id} not found."}
        if request.get("status") != "pending":
            return {"success": False, "error": f"Leave request {request_id} is {request.get('status')}, not pending."}
        employee = self.employees.get(request["employee_id"])
        if employee is None:
            return {"success": False, "error": f"Employee {request['employee_id']} not found."}
        approver = self.employees.get(approver_id)
        if approver is None:
            return {"success": False, "error": f"Employee {approver_id} not found."}
        if approver.get("status") != "active":
            return {"success": False, "error": f"{approver_id} is {approver.get('status')} and cannot decide requests."}
        manager = self.employees.get(employee.get("manager_id") or "")
        if manager is not None and manager.get("status") == "active":
            expected = manager["employee_id"]
        else:
            expected = self.departments.get(employee.get("department_id"), {}).get("head_employee_id")
        if expected is None or approver_id != expected or approver_id == employee["employee_id"]:
            return {"success": False, "error": f"{approver_id} may not decide this request; it goes to "
                    f"{expected or 'nobody (no active manager or department head)'}."}
        if request.get("leave_type") in ("annual", "sick"):
            field = "annual_leave_balance" if request["leave_type"] == "annual" else "sick_leave_balance"
            if float(employee.get(field, 0.0)) < request["days"]:
                return {"success": False, "error": f"{employee['employee_id']} no longer has {request['days']} "
                        f"{request['leave_type']} days (balance {employee.get(field, 0.0):g})."}
            employee[field] = float(employee.get(field, 0.0)) - request["days"]
        request["status"] = "approved"
        request["approver_id"] = approver_id
        request["decided_at"] = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        request["decision_note"] = note.strip() or None
        return {"success": True, "message": f"Leave request {request_id} approved by {approver_id}."}

    def reject_leave_request(self, request_id: str, approver_id: str, note: str) -> dict:
        """Reject a pending leave request with a note. The approver must be the employee's direct
        manager, or the department head when the employee has no active manager.

        Args:
            request_id (str): The pending request's id.
            approver_id (str): The deciding manager's employee id.
            note (str): Why the request is rejected (required).

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(request_id, str) or not request_id.strip():
            return {"success": False, "error": "request_id must be a non-empty string."}
        if not isinstance(approver_id, str) or not approver_id.strip():
            return {"success": False, "error": "approver_id must be a non-empty string."}
        if not isinstance(note, str) or not note.strip():
            return {"success": False, "error": "A rejection needs a note."}
        request = self.leave_requests.get(request_id)
        if request is None:
            return {"success": False, "error": f"Leave request {request_id} not found."}
        if request.get("status") != "pending":
            return {"success": False, "error": f"Leave request {request_id} is {request.get('status')}, not pending."}
        employee = self.employees.get(request["employee_id"])
        if employee is None:
            return {"success": False, "error": f"Employee {request['employee_id']} not found."}
        approver = self.employees.get(approver_id)
        if approver is None:
            return {"success": False, "error": f"Employee {approver_id} not found."}
        if approver.get("status") != "active":
            return {"success": False, "error": f"{approver_id} is {approver.get('status')} and cannot decide requests."}
        manager = self.employees.get(employee.get("manager_id") or "")
        if manager is not None and manager.get("status") == "active":
            expected = manager["employee_id"]
        else:
            expected = self.departments.get(employee.get("department_id"), {}).get("head_employee_id")
        if expected is None or approver_id != expected or approver_id == employee["employee_id"]:
            return {"success": False, "error": f"{approver_id} may not decide this request; it goes to "
                    f"{expected or 'nobody (no active manager or department head)'}."}
        request["status"] = "rejected"
        request["approver_id"] = approver_id
        request["decided_at"] = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        request["decision_note"] = note.strip()
        return {"success": True, "message": f"Leave request {request_id} rejected by {approver_id}."}

    def cancel_leave_request(self, request_id: str) -> dict:
        """Cancel a pending request, or an approved one that has not started (its days go back to
        the balance).

        Args:
            request_id (str): The request id.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(request_id, str) or not request_id.strip():
            return {"success": False, "error": "request_id must be a non-empty string."}
        request = self.leave_requests.get(request_id)
        if request is None:
            return {"success": False, "error": f"Leave request {request_id} not found."}
        status = request.get("status")
        if status not in ("pending", "approved"):
            return {"success": False, "error": f"Leave request {request_id} is {status} and cannot be cancelled."}
        today = datetime.now().date().isoformat()
        if status == "approved" and str(request.get("start_date")) <= today:
            return {"success": False, "error": f"Leave request {request_id} has already started."}
        restored = 0
        if status == "approved" and request.get("leave_type") in ("annual", "sick"):
            employee = self.employees.get(request["employee_id"])
            if employee is not None:
                field = "annual_leave_balance" if request["leave_type"] == "annual" else "sick_leave_balance"
                employee[field] = float(employee.get(field, 0.0)) + request["days"]
                restored = request["days"]
        request["status"] = "cancelled"
        request["decided_at"] = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        extra = f"; {restored} day(s) returned to the balance" if restored else ""
        return {"success": True, "message": f"Leave request {request_id} cancelled{extra}."}

    def change_job(self, employee_id: str, effective_date: str, new_title: Optional[str] = None,
                   new_level: Optional[int] = None, new_salary: Optional[float] = None,
                   note: str = "") -> dict:
        """Change an employee's job title, level and/or salary (promotion, regrade, raise). The
        level may move by at most one step and the salary by at most 20% in one change; each
        changed field is logged as a job change record.

        Args:
            employee_id (str): The employee id (not terminated).
            effective_date (str): When the change takes effect, ISO date.
            new_title (Optional[str]): New job title; None keeps it.
            new_level (Optional[int]): New level (1-8); None keeps it.
            new_salary (Optional[float]): New annual salary; None keeps it.
            note (str): Optional note, e.g. "Annual review".

        Returns:
            dict: {"success": True, "message": str, "data": {"change_ids": [str]}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        if not isinstance(effective_date, str):
            return {"success": False, "error": "effective_date must be an ISO date string."}
        if new_title is not None and (not isinstance(new_title, str) or not new_title.strip()):
            return {"success": False, "error": "new_title must be a non-empty string."}
        if new_level is not None and (isinstance(new_level, bool) or not isinstance(new_level, int)):
            return {"success": False, "error": "new_level must be an integer."}
        if new_salary is not None and (isinstance(new_salary, bool) or not isinstance(new_salary, (int, float))):
            return {"success": False, "error": "new_salary must be a number."}
        if not isinstance(note, str):
            return {"success": False, "error": "note must be a string."}
        if new_title is None and new_level is None and new_salary is None:
            return {"success": False, "error": "Give a new title, level or salary."}
        try:
            date.fromisoformat(effective_date)
        except ValueError:
            return {"success": False, "error": "effective_date must be an ISO date (YYYY-MM-DD)."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        if employee.get("status") == "terminated":
            return {"success": False, "error": f"Employee {employee_id} is terminated."}
        changes = []
        if new_title is not None and new_title.strip() != employee.get("job_title"):
            changes.append(("title_change", "job_title", employee.get("job_title"), new_title.strip()))
        if new_level is not None and new_level != employee.get("job_level"):
            if not self.MIN_LEVEL <= new_level <= self.MAX_LEVEL:
                return {"success": False, "error": "new_level must be between 1 and 8."}
            if abs(new_level - int(employee.get("job_level", 0))) > 1:
                return {"success": False, "error": f"The level may move by one step at a time "
                        f"(current level {employee.get('job_level')})."}
            changes.append(("level_change", "job_level", employee.get("job_level"), new_level))
        if new_salary is not None and round(float(new_salary), 2) != employee.get("salary"):
            current = float(employee.get("salary", 0.0))
            if new_salary <= 0:
                return {"success": False, "error": "new_salary must be positive."}
            if current > 0 and abs(new_salary - current) > current * self.MAX_SALARY_CHANGE + 1e-6:
                return {"success": False, "error": f"A salary change may be at most 20% of the current "
                        f"salary {current:.2f} (allowed {current * 0.8:.2f} to {current * 1.2:.2f})."}
            changes.append(("salary_change", "salary", employee.get("salary"), round(float(new_salary), 2)))
        if not changes:
            return {"success": False, "error": "Nothing changes: the values are the current ones."}
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        change_ids = []
        for change_type, field, old, new in changes:
            employee[field] = new
            number = len(self.job_changes) + 1
            while f"JC-{number:04d}" in self.job_changes:
                number += 1
            change_id = f"JC-{number:04d}"
            self.job_changes[change_id] = {
                "change_id": change_id, "employee_id": employee_id, "change_type": change_type,
                "effective_date": effective_date, "old_value": str(old), "new_value": str(new),
                "note": note.strip(), "recorded_at": stamp}
            change_ids.append(change_id)
        return {"success": True, "message": f"Updated {employee_id}: "
                f"{', '.join(change[1] for change in changes)}.", "data": {"change_ids": change_ids}}

    def transfer_employee(self, employee_id: str, department_id: str, effective_date: str,
                          manager_id: Optional[str] = None) -> dict:
        """Move an employee to another active department with a free place. The new manager is
        the given one (a non-terminated member of the target department) or else the target
        department's head. A department head who leaves vacates the headship.

        Args:
            employee_id (str): The employee id (not terminated).
            department_id (str): The target department id.
            effective_date (str): When the transfer takes effect, ISO date.
            manager_id (Optional[str]): New direct manager in the target department; None means
                the department head.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        if not isinstance(department_id, str) or not department_id.strip():
            return {"success": False, "error": "department_id must be a non-empty string."}
        if not isinstance(effective_date, str):
            return {"success": False, "error": "effective_date must be an ISO date string."}
        if manager_id is not None and not isinstance(manager_id, str):
            return {"success": False, "error": "manager_id must be a string."}
        try:
            date.fromisoformat(effective_date)
        except ValueError:
            return {"success": False, "error": "effective_date must be an ISO date (YYYY-MM-DD)."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        if employee.get("status") == "terminated":
            return {"success": False, "error": f"Employee {employee_id} is terminated."}
        target = self.departments.get(department_id)
        if target is None:
            return {"success": False, "error": f"Department {department_id} not found."}
        if target.get("status") != "active":
            return {"success": False, "error": f"Department {department_id} is closed."}
        if employee.get("department_id") == department_id:
            return {"success": False, "error": f"{employee_id} is already in {department_id}."}
        headcount = sum(1 for other in self.employees.values()
                        if other.get("department_id") == department_id and other.get("status") != "terminated")
        if headcount >= target.get("headcount_limit", 0):
            return {"success": False, "error": f"Department {department_id} is at its headcount limit "
                    f"of {target.get('headcount_limit', 0)}."}
        if manager_id is None:
            manager_id = target.get("head_employee_id")
        else:
            manager = self.employees.get(manager_id)
            if manager is None:
                return {"success": False, "error": f"Manager {manager_id} not found."}
            if manager.get("status") == "terminated" or manager.get("department_id") != department_id:
                return {"success": False, "error": f"Manager {manager_id} must be a current member of {department_id}."}
        if manager_id == employee_id:
            manager_id = None
        old_department = employee.get("department_id")
        source = self.departments.get(old_department)
        vacated = False
        if source is not None and source.get("head_employee_id") == employee_id:
            source["head_employee_id"] = None
            vacated = True
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        old_manager = employee.get("manager_id")
        employee["department_id"] = department_id
        employee["manager_id"] = manager_id
        for change_type, old, new in (("transfer", old_department, department_id),
                                      ("manager_change", old_manager, manager_id)):
            if old == new:
                continue
            number = len(self.job_changes) + 1
            while f"JC-{number:04d}" in self.job_changes:
                number += 1
            change_id = f"JC-{number:04d}"
            self.job_changes[change_id] = {
                "change_id": change_id, "employee_id": employee_id, "change_type": change_type,
                "effective_date": effective_date, "old_value": str(old or ""), "new_value": str(new or ""),
                "note": "Transfer", "recorded_at": stamp}
        extra = f"; the headship of {old_department} is now vacant" if vacated else ""
        return {"success": True, "message": f"{employee_id} moved from {old_department} to {department_id}, "
                f"reporting to {manager_id or 'nobody'}{extra}."}

    def assign_manager(self, employee_id: str, manager_id: str, effective_date: str) -> dict:
        """Set an employee's direct manager. The manager must be another non-terminated employee
        and may not report (directly or indirectly) to the employee.

        Args:
            employee_id (str): The employee id (not terminated).
            manager_id (str): The new manager's employee id.
            effective_date (str): When the change takes effect, ISO date.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        if not isinstance(manager_id, str) or not manager_id.strip():
            return {"success": False, "error": "manager_id must be a non-empty string."}
        if not isinstance(effective_date, str):
            return {"success": False, "error": "effective_date must be an ISO date string."}
        try:
            date.fromisoformat(effective_date)
        except ValueError:
            return {"success": False, "error": "effective_date must be an ISO date (YYYY-MM-DD)."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        if employee.get("status") == "terminated":
            return {"success": False, "error": f"Employee {employee_id} is terminated."}
        manager = self.employees.get(manager_id)
        if manager is None:
            return {"success": False, "error": f"Manager {manager_id} not found."}
        if manager_id == employee_id:
            return {"success": False, "error": "An employee cannot manage themself."}
        if manager.get("status") == "terminated":
            return {"success": False, "error": f"Manager {manager_id} is terminated."}
        if employee.get("manager_id") == manager_id:
            return {"success": False, "error": f"{manager_id} already manages {employee_id}."}
        current = manager.get("manager_id")
        seen = {manager_id}
        while current and current not in seen:
            if current == employee_id:
                return {"success": False, "error": f"{manager_id} reports to {employee_id}; that would make a cycle."}
            seen.add(current)
            current = self.employees.get(current, {}).get("manager_id")
        old = employee.get("manager_id")
        employee["manager_id"] = manager_id
        number = len(self.job_changes) + 1
        while f"JC-{number:04d}" in self.job_changes:
            number += 1
        change_id = f"JC-{number:04d}"
        self.job_changes[change_id] = {
            "change_id": change_id, "employee_id": employee_id, "change_type": "manager_change",
            "effective_date": effective_date, "old_value": str(old or ""), "new_value": manager_id,
            "note": "", "recorded_at": datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")}
        return {"success": True, "message": f"{employee_id} now reports to {manager_id}."}

    def terminate_employee(self, employee_id: str, termination_date: str, reason: str) -> dict:
        """Terminate an employee. Refused while they still manage non-terminated employees;
        cancels their pending and not-yet-started approved leave and vacates a headship.

        Args:
            employee_id (str): The employee id.
            termination_date (str): Last day of employment, ISO date, not before the hire date.
            reason (str): Why employment ends, e.g. "Resignation".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        if not isinstance(termination_date, str):
            return {"success": False, "error": "termination_date must be an ISO date string."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        try:
            end = date.fromisoformat(termination_date)
        except ValueError:
            return {"success": False, "error": "termination_date must be an ISO date (YYYY-MM-DD)."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        if employee.get("status") == "terminated":
            return {"success": False, "error": f"Employee {employee_id} is already terminated."}
        if end.isoformat() < str(employee.get("hire_date", "")):
            return {"success": False, "error": "termination_date is before the hire date."}
        reports = sorted(other_id for other_id, other in self.employees.items()
                         if other.get("manager_id") == employee_id and other.get("status") != "terminated")
        if reports:
            return {"success": False, "error": f"{employee_id} still manages {', '.join(reports)}; "
                    "assign them another manager first."}
        today = datetime.now().date().isoformat()
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        cancelled = []
        for request_id, request in sorted(self.leave_requests.items()):
            if request.get("employee_id") != employee_id:
                continue
            if request.get("status") == "pending" or (request.get("status") == "approved"
                                                      and str(request.get("start_date")) > today):
                request["status"] = "cancelled"
                request["decided_at"] = stamp
                request["decision_note"] = "Cancelled on termination"
                cancelled.append(request_id)
        department = self.departments.get(employee.get("department_id"))
        if department is not None and department.get("head_employee_id") == employee_id:
            department["head_employee_id"] = None
        old_status = employee.get("status")
        employee["status"] = "terminated"
        employee["termination_date"] = end.isoformat()
        number = len(self.job_changes) + 1
        while f"JC-{number:04d}" in self.job_changes:
            number += 1
        change_id = f"JC-{number:04d}"
        self.job_changes[change_id] = {
            "change_id": change_id, "employee_id": employee_id, "change_type": "termination",
            "effective_date": end.isoformat(), "old_value": str(old_status), "new_value": "terminated",
            "note": reason.strip(), "recorded_at": stamp}
        extra = f"; cancelled leave {', '.join(cancelled)}" if cancelled else ""
        return {"success": True, "message": f"{employee_id} terminated as of {end.isoformat()}{extra}."}

    def adjust_leave_balance(self, employee_id: str, leave_type: Literal["annual", "sick"], days: float,
                             reason: str) -> dict:
        """Add days to (positive) or remove days from (negative) an employee's annual or sick leave
        balance, between -30 and +30 days, never below zero.

        Args:
            employee_id (str): The employee id (not terminated).
            leave_type (str): "annual" or "sick".
            days (float): Days to add (positive) or remove (negative); not zero.
            reason (str): Why, e.g. "Carry-over from 2024".

        Returns:
            dict: {"success": True, "message": str, "data": {"balance": float}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(employee_id, str) or not employee_id.strip():
            return {"success": False, "error": "employee_id must be a non-empty string."}
        if not isinstance(leave_type, str) or leave_type not in ("annual", "sick"):
            return {"success": False, "error": "leave_type must be annual or sick."}
        if isinstance(days, bool) or not isinstance(days, (int, float)):
            return {"success": False, "error": "days must be a number."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        if days == 0 or abs(days) > self.MAX_BALANCE_ADJUSTMENT:
            return {"success": False, "error": "days must be non-zero and between -30 and 30."}
        employee = self.employees.get(employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found."}
        if employee.get("status") == "terminated":
            return {"success": False, "error": f"Employee {employee_id} is terminated."}
        field = "annual_leave_balance" if leave_type == "annual" else "sick_leave_balance"
        old = float(employee.get(field, 0.0))
        new = round(old + float(days), 2)
        if new < 0:
            return {"success": False, "error": f"The {leave_type} balance would become negative ({new:g})."}
        employee[field] = new
        number = len(self.job_changes) + 1
        while f"JC-{number:04d}" in self.job_changes:
            number += 1
        change_id = f"JC-{number:04d}"
        self.job_changes[change_id] = {
            "change_id": change_id, "employee_id": employee_id, "change_type": "leave_adjustment",
            "effective_date": datetime.now().date().isoformat(), "old_value": f"{old:g} {leave_type}",
            "new_value": f"{new:g} {leave_type}", "note": reason.strip(),
            "recorded_at": datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")}
        return {"success": True, "message": f"{leave_type.capitalize()} balance of {employee_id} changed "
                f"from {old:g} to {new:g} days.", "data": {"balance": new}}
