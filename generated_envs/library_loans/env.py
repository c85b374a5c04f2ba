from datetime import date, datetime, timedelta
from typing import Dict, List, Literal, Optional, TypedDict
import uuid


class MemberInfo(TypedDict):
    member_id: str
    name: str
    email: str
    phone: str
    tier: str  # "standard" | "premium" | "student"
    status: str  # "active" | "suspended"
    joined_date: str  # ISO date


class BookInfo(TypedDict):
    book_id: str
    title: str
    author: str
    isbn: str
    genre: str
    total_copies: int
    available_copies: int  # copies on the open shelf, not reserved for a ready hold


class LoanInfo(TypedDict):
    loan_id: str
    member_id: str
    book_id: str
    checkout_date: str  # ISO date
    due_date: str  # ISO date
    returned_date: Optional[str]  # ISO date, None while the loan is active
    renewals: int
    status: str  # "active" | "returned"


class HoldInfo(TypedDict):
    hold_id: str
    member_id: str
    book_id: str
    placed_at: str  # ISO date-time; the queue is served in this order
    status: str  # "waiting" | "ready" | "fulfilled" | "cancelled"


class FineInfo(TypedDict):
    fine_id: str
    member_id: str
    loan_id: Optional[str]
    amount: float  # amount charged
    balance: float  # amount still owed
    reason: str
    created_date: str  # ISO date
    status: str  # "unpaid" | "paid"


class LibraryLoanSystem:
    # Circulation policy.
    LOAN_LIMITS = {"standard": 5, "premium": 8, "student": 3}
    LOAN_PERIOD_DAYS = 14
    MAX_RENEWALS = 2
    FINE_PER_DAY = 0.25
    FINE_BLOCK_THRESHOLD = 10.0

    def __init__(self, init_config: dict):
        # Members of the library, by member_id.
        self.members: Dict[str, MemberInfo] = {}
        # Catalogue titles with their copy counts, by book_id.
        self.books: Dict[str, BookInfo] = {}
        # Current and past loans, by loan_id.
        self.loans: Dict[str, LoanInfo] = {}
        # Holds (reservation queue entries), by hold_id.
        self.holds: Dict[str, HoldInfo] = {}
        # Fines charged to members, by fine_id.
        self.fines: Dict[str, FineInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - Only members with status "active" may check out, renew or place holds.
        # - A member may have at most LOAN_LIMITS[tier] active loans (standard 5, premium 8,
        #   student 3).
        # - A member whose unpaid fines exceed FINE_BLOCK_THRESHOLD (10.00) may not check out or
        #   renew.
        # - A book can be checked out only from an available copy, or from a copy held "ready" for
        #   that member; a member may not borrow a second copy of a title they already have.
        # - A loan lasts LOAN_PERIOD_DAYS (14) days; a renewal extends the due date by 14 days.
        # - A loan may be renewed at most MAX_RENEWALS (2) times, not once overdue, and not while
        #   another member is waiting for that book.
        # - Returning a loan after its due date charges FINE_PER_DAY (0.25) per day late.
        # - A returned (or released) copy goes to the earliest waiting hold, which becomes "ready";
        #   with no waiting hold it goes back on the shelf.
        # - Holds may be placed only on books with no available copy, at most one open hold per
        #   member and book, and not on a book the member already has on loan.
        # - Payments settle the oldest unpaid fines first and may not exceed the amount owed.

    # ---- helpers ----

    def _today(self) -> date:
        return datetime.now().date()

    def _active_loans(self, member_id: str) -> List[LoanInfo]:
        return [loan for loan in self.loans.values()
                if loan["member_id"] == member_id and loan["status"] == "active"]

    def _unpaid_balance(self, member_id: str) -> float:
        return round(sum(fine["balance"] for fine in self.fines.values()
                         if fine["member_id"] == member_id and fine["status"] == "unpaid"), 2)

    def _open_holds(self, book_id: str, status: str) -> List[HoldInfo]:
        holds = [hold for hold in self.holds.values()
                 if hold["book_id"] == book_id and hold["status"] == status]
        return sorted(holds, key=lambda hold: (hold["placed_at"], hold["hold_id"]))

    def _release_copy(self, book_id: str) -> None:
        waiting = self._open_holds(book_id, "waiting")
        if waiting:
            waiting[0]["status"] = "ready"
        elif book_id in self.books:
            book = self.books[book_id]
            book["available_copies"] = min(book["available_copies"] + 1, book["total_copies"])

    def _active_member(self, member_id: str) -> Optional[str]:
        member = self.members.get(member_id)
        if member is None:
            return "Member not found."
        if member["status"] != "active":
            return f"Member {member_id} is {member['status']}."
        return None

    # ---- query tools ----

    def get_member(self, member_id: str) -> dict:
        """Look up a member's profile together with their current borrowing position.

        Args:
            member_id (str): The member's library card id, e.g. "M-1001".

        Returns:
            dict: {"success": True, "data": MemberInfo plus "active_loans", "loan_limit" and
            "unpaid_balance"}, or {"success": False, "error": str}.
        """
        member = self.members.get(member_id)
        if member is None:
            return {"success": False, "error": "Member not found."}
        data = dict(member)
        data["active_loans"] = len(self._active_loans(member_id))
        data["loan_limit"] = self.LOAN_LIMITS.get(member["tier"], 0)
        data["unpaid_balance"] = self._unpaid_balance(member_id)
        return {"success": True, "data": data}

    def search_books(self, query: str, field: Literal["title", "author", "any"] = "any",
                     available_only: bool = False) -> dict:
        """Search the catalogue by title and/or author (case-insensitive substring match).

        Args:
            query (str): Text to look for.
            field (str): Where to look: "title", "author" or "any" (both).
            available_only (bool): Only return books with at least one copy on the shelf.

        Returns:
            dict: {"success": True, "data": List[BookInfo]} (possibly empty).
        """
        if not isinstance(query, str) or not isinstance(available_only, bool):
            return {"success": False, "error": "query must be a string and available_only a boolean."}
        needle = query.strip().lower()
        if not needle:
            return {"success": False, "error": "Query must not be empty."}
        if field not in ("title", "author", "any"):
            return {"success": False, "error": "field must be 'title', 'author' or 'any'."}
        matches = []
        for book in self.books.values():
            haystacks = [book["title"], book["author"]] if field == "any" else [book[field]]
            if any(needle in text.lower() for text in haystacks):
                if not available_only or book["available_copies"] > 0:
                    matches.append(dict(book))
        return {"success": True, "data": matches}

    def get_book_availability(self, book_id: str) -> dict:
        """Report how many copies of a book are on the shelf and how long its hold queue is.

        Args:
            book_id (str): The catalogue id of the book, e.g. "B-204".

        Returns:
            dict: {"success": True, "data": {"book_id", "title", "total_copies",
            "available_copies", "waiting_holds", "ready_holds"}}.
        """
        book = self.books.get(book_id)
        if book is None:
            return {"success": False, "error": "Book not found."}
        return {"success": True, "data": {
            "book_id": book_id,
            "title": book["title"],
            "total_copies": book["total_copies"],
            "available_copies": book["available_copies"],
            "waiting_holds": len(self._open_holds(book_id, "waiting")),
            "ready_holds": len(self._open_holds(book_id, "ready")),
        }}

    def list_member_loans(self, member_id: str, include_returned: bool = False) -> dict:
        """List a member's loans, flagging the ones that are overdue today.

        Args:
            member_id (str): The member's library card id.
            include_returned (bool): Also list loans that were already returned.

        Returns:
            dict: {"success": True, "data": List[LoanInfo plus "title" and "days_overdue"]}.
        """
        if not isinstance(include_returned, bool):
            return {"success": False, "error": "include_returned must be a boolean."}
        if member_id not in self.members:
            return {"success": False, "error": "Member not found."}
        today = self._today()
        result = []
        for loan in self.loans.values():
            if loan["member_id"] != member_id:
                continue
            if loan["status"] != "active" and not include_returned:
                continue
            entry = dict(loan)
            entry["title"] = self.books.get(loan["book_id"], {}).get("title", "")
            late = (today - date.fromisoformat(loan["due_date"])).days
            entry["days_overdue"] = late if loan["status"] == "active" and late > 0 else 0
            result.append(entry)
        return {"success": True, "data": result}

    def list_holds(self, member_id: Optional[str] = None, book_id: Optional[str] = None) -> dict:
        """List open holds (waiting or ready) in queue order, optionally filtered.

        Args:
            member_id (Optional[str]): Only holds placed by this member.
            book_id (Optional[str]): Only holds on this book.

        Returns:
            dict: {"success": True, "data": List[HoldInfo]} ordered by when they were placed.
        """
        if not all(value is None or isinstance(value, str) for value in (member_id, book_id)):
            return {"success": False, "error": "member_id and book_id must be strings."}
        holds = [dict(hold) for hold in self.holds.values()
                 if hold["status"] in ("waiting", "ready")
                 and (member_id is None or hold["member_id"] == member_id)
                 and (book_id is None or hold["book_id"] == book_id)]
        holds.sort(key=lambda hold: (hold["placed_at"], hold["hold_id"]))
        return {"success": True, "data": holds}

    def get_member_fines(self, member_id: str, include_paid: bool = False) -> dict:
        """List a member's fines and the total they still owe.

        Args:
            member_id (str): The member's library card id.
            include_paid (bool): Also list fines that are fully paid.

        Returns:
            dict: {"success": True, "data": {"fines": List[FineInfo], "unpaid_balance": float}}.
        """
        if not isinstance(include_paid, bool):
            return {"success": False, "error": "include_paid must be a boolean."}
        if member_id not in self.members:
            return {"success": False, "error": "Member not found."}
        fines = [dict(fine) for fine in self.fines.values()
                 if fine["member_id"] == member_id and (include_paid or fine["status"] == "unpaid")]
        return {"success": True,
                "data": {"fines": fines, "unpaid_balance": self._unpaid_balance(member_id)}}

    # ---- state-change tools ----

    def checkout_book(self, member_id: str, book_id: str) -> dict:
        """Lend a book to a member for 14 days.

        A copy held "ready" for this member is used first (and the hold is fulfilled); otherwise
        a copy must be on the shelf.

        Args:
            member_id (str): The borrowing member's library card id.
            book_id (str): The catalogue id of the book.

        Returns:
            dict: {"success": True, "data": LoanInfo} with the new loan, or
            {"success": False, "error": str}.

        Constraints:
            The member must be active, owe at most 10.00 in unpaid fines, be under their tier's
            loan limit and not already have this book on loan.
        """
        problem = self._active_member(member_id)
        if problem:
            return {"success": False, "error": problem}
        book = self.books.get(book_id)
        if book is None:
            return {"success": False, "error": "Book not found."}
        active = self._active_loans(member_id)
        if any(loan["book_id"] == book_id for loan in active):
            return {"success": False, "error": "Member already has this book on loan."}
        balance = self._unpaid_balance(member_id)
        if balance > self.FINE_BLOCK_THRESHOLD:
            return {"success": False,
                    "error": f"Unpaid fines of {balance:.2f} exceed the limit of "
                             f"{self.FINE_BLOCK_THRESHOLD:.2f}; payment is required first."}
        limit = self.LOAN_LIMITS.get(self.members[member_id]["tier"], 0)
        if len(active) >= limit:
            return {"success": False, "error": f"Loan limit of {limit} reached."}
        ready = [hold for hold in self._open_holds(book_id, "ready")
                 if hold["member_id"] == member_id]
        if ready:
            ready[0]["status"] = "fulfilled"
        elif book["available_copies"] > 0:
            book["available_copies"] -= 1
        else:
            return {"success": False, "error": "No copy is available; place a hold instead."}
        today = self._today()
        loan: LoanInfo = {
            "loan_id": f"L-{uuid.uuid4().hex[:8]}",
            "member_id": member_id,
            "book_id": book_id,
            "checkout_date": today.isoformat(),
            "due_date": (today + timedelta(days=self.LOAN_PERIOD_DAYS)).isoformat(),
            "returned_date": None,
            "renewals": 0,
            "status": "active",
        }
        self.loans[loan["loan_id"]] = loan
        return {"success": True, "data": dict(loan)}

    def return_book(self, loan_id: str) -> dict:
        """Check a borrowed book back in, charging an overdue fine if it is late.

        The copy goes to the next member waiting for the book, or back on the shelf.

        Args:
            loan_id (str): The id of the active loan being returned.

        Returns:
            dict: {"success": True, "message": str} naming any fine charged, or
            {"success": False, "error": str}.
        """
        loan = self.loans.get(loan_id)
        if loan is None:
            return {"success": False, "error": "Loan not found."}
        if loan["status"] != "active":
            return {"success": False, "error": "Loan has already been returned."}
        today = self._today()
        loan["status"] = "returned"
        loan["returned_date"] = today.isoformat()
        self._release_copy(loan["book_id"])
        days_late = (today - date.fromisoformat(loan["due_date"])).days
        if days_late <= 0:
            return {"success": True, "message": "Book returned on time."}
        amount = round(days_late * self.FINE_PER_DAY, 2)
        fine_id = f"F-{uuid.uuid4().hex[:8]}"
        title = self.books.get(loan["book_id"], {}).get("title", loan["book_id"])
        self.fines[fine_id] = {
            "fine_id": fine_id,
            "member_id": loan["member_id"],
            "loan_id": loan_id,
            "amount": amount,
            "balance": amount,
            "reason": f"Overdue: {title} ({days_late} days late)",
            "created_date": today.isoformat(),
            "status": "unpaid",
        }
        return {"success": True, "message": f"Book returned {days_late} days late; "
                                            f"fine {fine_id} of {amount:.2f} charged."}

    def renew_loan(self, loan_id: str) -> dict:
        """Extend an active loan's due date by 14 days.

        Args:
            loan_id (str): The id of the loan to renew.

        Returns:
            dict: {"success": True, "data": LoanInfo} with the new due_date, or
            {"success": False, "error": str}.

        Constraints:
            At most 2 renewals per loan; not when the loan is overdue, when another member is
            waiting for the book, when the member is not active, or when they owe more than 10.00.
        """
        loan = self.loans.get(loan_id)
        if loan is None:
            return {"success": False, "error": "Loan not found."}
        if loan["status"] != "active":
            return {"success": False, "error": "Only active loans can be renewed."}
        problem = self._active_member(loan["member_id"])
        if problem:
            return {"success": False, "error": problem}
        if self._unpaid_balance(loan["member_id"]) > self.FINE_BLOCK_THRESHOLD:
            return {"success": False, "error": "Unpaid fines exceed the limit; pay them first."}
        if loan["renewals"] >= self.MAX_RENEWALS:
            return {"success": False, "error": f"Renewal limit of {self.MAX_RENEWALS} reached."}
        due = date.fromisoformat(loan["due_date"])
        if self._today() > due:
            return {"success": False, "error": "Overdue loans cannot be renewed; return the book."}
        if any(hold["member_id"] != loan["member_id"]
               for hold in self._open_holds(loan["book_id"], "waiting")):
            return {"success": False, "error": "Another member is waiting for this book."}
        loan["due_date"] = (due + timedelta(days=self.LOAN_PERIOD_DAYS)).isoformat()
        loan["renewals"] += 1
        return {"success": True, "data": dict(loan)}

    def place_hold(self, member_id: str, book_id: str) -> dict:
        """Join the hold queue for a book that has no copy on the shelf.

        Args:
            member_id (str): The member placing the hold.
            book_id (str): The catalogue id of the book.

        Returns:
            dict: {"success": True, "data": HoldInfo plus its queue "position"}, or
            {"success": False, "error": str}.
        """
        problem = self._active_member(member_id)
        if problem:
            return {"success": False, "error": problem}
        book = self.books.get(book_id)
        if book is None:
            return {"success": False, "error": "Book not found."}
        if book["available_copies"] > 0:
            return {"success": False, "error": "A copy is available; check it out instead."}
        if any(loan["book_id"] == book_id for loan in self._active_loans(member_id)):
            return {"success": False, "error": "Member already has this book on loan."}
        if any(hold["member_id"] == member_id and hold["book_id"] == book_id
               and hold["status"] in ("waiting", "ready") for hold in self.holds.values()):
            return {"success": False, "error": "Member already has an open hold on this book."}
        hold: HoldInfo = {
            "hold_id": f"H-{uuid.uuid4().hex[:8]}",
            "member_id": member_id,
            "book_id": book_id,
            "placed_at": datetime.now().isoformat(timespec="seconds"),
            "status": "waiting",
        }
        self.holds[hold["hold_id"]] = hold
        data = dict(hold)
        data["position"] = len(self._open_holds(book_id, "waiting"))
        return {"success": True, "data": data}

    def cancel_hold(self, hold_id: str) -> dict:
        """Cancel a waiting or ready hold; a copy it reserved goes to the next member in line.

        Args:
            hold_id (str): The id of the hold to cancel.

        Returns:
            dict: {"success": True, "message": str} or {"success": False, "error": str}.
        """
        hold = self.holds.get(hold_id)
        if hold is None:
            return {"success": False, "error": "Hold not found."}
        if hold["status"] not in ("waiting", "ready"):
            return {"success": False, "error": f"Hold is already {hold['status']}."}
        was_ready = hold["status"] == "ready"
        hold["status"] = "cancelled"
        if was_ready:
            self._release_copy(hold["book_id"])
        return {"success": True, "message": f"Hold {hold_id} cancelled."}

    def pay_fines(self, member_id: str, amount: Optional[float] = None) -> dict:
        """Take a payment towards a member's unpaid fines, settling the oldest fines first.

        Args:
            member_id (str): The paying member's library card id.
            amount (Optional[float]): How much is paid; omit (or null) to pay the whole balance.

        Returns:
            dict: {"success": True, "data": {"paid": float, "unpaid_balance": float}}, or
            {"success": False, "error": str}; a payment must be positive and at most the balance.
        """
        if member_id not in self.members:
            return {"success": False, "error": "Member not found."}
        owed = self._unpaid_balance(member_id)
        if owed <= 0:
            return {"success": False, "error": "Member has no unpaid fines."}
        payment = owed if amount is None else round(amount, 2)
        if payment <= 0:
            return {"success": False, "error": "Payment must be positive."}
        if payment > owed:
            return {"success": False, "error": f"Payment exceeds the unpaid balance of {owed:.2f}."}
        unpaid = sorted((fine for fine in self.fines.values()
                         if fine["member_id"] == member_id and fine["status"] == "unpaid"),
                        key=lambda fine: (fine["created_date"], fine["fine_id"]))
        remaining = payment
        for fine in unpaid:
            applied = min(remaining, fine["balance"])
            fine["balance"] = round(fine["balance"] - applied, 2)
            remaining = round(remaining - applied, 2)
            if fine["balance"] <= 0:
                fine["status"] = "paid"
            if remaining <= 0:
                break
        return {"success": True,
                "data": {"paid": payment, "unpaid_balance": self._unpaid_balance(member_id)}}

    def update_member_contact(self, member_id: str, email: Optional[str] = None,
                              phone: Optional[str] = None) -> dict:
        """Change a member's email address and/or phone number.

        Args:
            member_id (str): The member's library card id.
            email (Optional[str]): New email address; omit to keep the current one.
            phone (Optional[str]): New phone number (digits, spaces, "+", "-" or parentheses, at
                least 7 digits); omit to keep the current one.

        Returns:
            dict: {"success": True, "message": str} or {"success": False, "error": str}.
        """
        member = self.members.get(member_id)
        if member is None:
            return {"success": False, "error": "Member not found."}
        if email is None and phone is None:
            return {"success": False, "error": "Provide an email and/or a phone number."}
        if not all(value is None or isinstance(value, str) for value in (email, phone)):
            return {"success": False, "error": "email and phone must be strings."}
        if email is not None and ("@" not in email or "." not in email.split("@")[-1]):
            return {"success": False, "error": "Invalid email address."}
        if phone is not None:
            digits = [ch for ch in phone if ch.isdigit()]
            if len(digits) < 7 or any(not (ch.isdigit() or ch in " +-()") for ch in phone):
                return {"success": False, "error": "Invalid phone number."}
        if email is not None:
            member["email"] = email.strip()
        if phone is not None:
            member["phone"] = phone.strip()
        return {"success": True, "message": f"Contact details of {member_id} updated."}
