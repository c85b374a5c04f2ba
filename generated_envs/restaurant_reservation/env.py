from datetime import date, datetime
from typing import Dict, Optional, TypedDict


class TableInfo(TypedDict):
    table_id: str
    section: str  # "main" | "patio" | "bar" | "private"
    capacity: int
    status: str  # "active" | "out_of_service"


class GuestInfo(TypedDict):
    guest_id: str
    name: str
    phone: str
    email: str
    no_show_count: int
    vip: bool


class ServiceSlotInfo(TypedDict):
    slot_id: str
    date: str  # ISO 8601 date
    start_time: str  # "HH:MM", restaurant local time
    max_covers: int  # guests the kitchen can serve in this seating
    status: str  # "open" | "closed"


class ReservationInfo(TypedDict):
    reservation_id: str
    guest_id: str
    slot_id: str
    table_id: str
    party_size: int
    status: str  # "booked" | "seated" | "cancelled" | "no_show"
    special_requests: str
    created_at: str  # ISO 8601 date-time


class WaitlistEntryInfo(TypedDict):
    entry_id: str
    guest_id: str
    slot_id: str
    party_size: int
    status: str  # "waiting" | "promoted" | "removed"
    added_at: str  # ISO 8601 date-time; the list is served in this order


class DepositInfo(TypedDict):
    deposit_id: str
    reservation_id: str
    amount: float
    status: str  # "pending" | "held" | "refunded" | "forfeited" | "applied" | "void"
    method: Optional[str]  # "card" | "cash", once collected
    collected_at: Optional[str]  # ISO 8601 date-time


class RestaurantReservationSystem:
    SECTIONS = ("main", "patio", "bar", "private")
    RESERVATION_STATUSES = ("booked", "seated", "cancelled", "no_show")
    DEPOSIT_STATUSES = ("pending", "held", "refunded", "forfeited", "applied", "void")
    DEPOSIT_METHODS = ("card", "cash")
    LARGE_PARTY_SIZE = 6
    DEPOSIT_PER_GUEST = 20.0
    MAX_NO_SHOWS = 3
    FREE_CANCELLATION_HOURS = 24
    MAX_PARTY_SIZE = 12

    def __init__(self, init_config: dict):
        # Dining tables, by table_id.
        self.tables: Dict[str, TableInfo] = {}
        # Known guests, by guest_id.
        self.guests: Dict[str, GuestInfo] = {}
        # Seatings (a date and start time) that can be booked, by slot_id.
        self.slots: Dict[str, ServiceSlotInfo] = {}
        # Reservations, by reservation_id.
        self.reservations: Dict[str, ReservationInfo] = {}
        # Waitlist entries, by entry_id.
        self.waitlist: Dict[str, WaitlistEntryInfo] = {}
        # Deposits taken for reservations, by deposit_id.
        self.deposits: Dict[str, DepositInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - A reservation refers to an existing guest, an open slot and an active table.
        # - A party fits a table when its size is at least half the table's capacity (rounded
        #   up) and at most its capacity.
        # - A table holds at most one booked or seated reservation per slot; a guest holds at
        #   most one booked or seated reservation per slot.
        # - The booked and seated covers of a slot never exceed its max_covers.
        # - Guests with MAX_NO_SHOWS (3) or more no-shows cannot book or be promoted.
        # - Parties of LARGE_PARTY_SIZE (6) or more, and any booking in the private section,
        #   need a deposit of DEPOSIT_PER_GUEST (20.00) per guest: created "pending" at booking,
        #   "held" once collected. A reservation with a pending deposit cannot be seated.
        # - Workflow: booked -> seated | cancelled | no_show. Seating happens on the slot's
        #   date (a held deposit is then applied to the bill); a no-show is marked only after the
        #   slot has started and adds one to the guest's no_show_count (a held deposit is
        #   forfeited).
        # - Cancelling at least FREE_CANCELLATION_HOURS (24) before the slot refunds a held
        #   deposit, later it is forfeited; a pending deposit becomes void.
        # - Waitlist: one waiting entry per guest and slot, for open slots; promoting an entry
        #   books a table under the same rules and marks the entry "promoted".

    def get_guest(self, guest_id: str) -> dict:
        """Get a guest's profile with their reservation history counts.

        Args:
            guest_id (str): The guest id, e.g. "G-0004".

        Returns:
            dict: {"success": True, "data": GuestInfo plus "upcoming" (List[str] of booked
            reservation ids) and "blocked" (bool: too many no-shows to book)}, or
            {"success": False, "error": str}.
        """
        if not isinstance(guest_id, str) or not guest_id.strip():
            return {"success": False, "error": "guest_id must be a non-empty string."}
        guest = self.guests.get(guest_id)
        if guest is None:
            return {"success": False, "error": f"Guest {guest_id} not found."}
        data = dict(guest)
        data["upcoming"] = sorted(str(r.get("reservation_id")) for r in self.reservations.values()
                                  if r.get("guest_id") == guest_id and r.get("status") == "booked")
        data["blocked"] = int(guest.get("no_show_count", 0)) >= self.MAX_NO_SHOWS
        return {"success": True, "data": data}

    def find_guests(self, query: str) -> dict:
        """Find guests whose name, phone or email contains the given text (case-insensitive).

        Args:
            query (str): Text to look for, e.g. a surname or the last digits of a phone number.

        Returns:
            dict: {"success": True, "data": List[GuestInfo]} sorted by guest_id (possibly empty), or
            {"success": False, "error": str}.
        """
        if not isinstance(query, str) or not query.strip():
            return {"success": False, "error": "query must be a non-empty string."}
        needle = query.strip().lower()
        found = [dict(guest) for guest in self.guests.values()
                 if needle in str(guest.get("name", "")).lower()
                 or needle in str(guest.get("phone", "")).lower()
                 or needle in str(guest.get("email", "")).lower()]
        found.sort(key=lambda guest: str(guest.get("guest_id", "")))
        return {"success": True, "data": found}

    def list_tables(self, section: Optional[str] = None, min_capacity: Optional[int] = None,
                    include_out_of_service: bool = False) -> dict:
        """List tables, optionally of one section or seating at least a number of guests.

        Args:
            section (Optional[str]): "main", "patio", "bar" or "private".
            min_capacity (Optional[int]): Only tables seating at least this many guests.
            include_out_of_service (bool): Also list tables that are out of service.

        Returns:
            dict: {"success": True, "data": List[TableInfo]} sorted by capacity then id, or
            {"success": False, "error": str}.
        """
        if section is not None and not isinstance(section, str):
            return {"success": False, "error": "section must be a string or null."}
        if min_capacity is not None and (not isinstance(min_capacity, int) or isinstance(min_capacity, bool)):
            return {"success": False, "error": "min_capacity must be an integer or null."}
        if not isinstance(include_out_of_service, bool):
            return {"success": False, "error": "include_out_of_service must be a boolean."}
        if section is not None and section not in self.SECTIONS:
            return {"success": False, "error": f"Unknown section {section!r}; use one of "
                                               f"{', '.join(self.SECTIONS)}."}
        found = [dict(table) for table in self.tables.values()
                 if (section is None or table.get("section") == section)
                 and (min_capacity is None or int(table.get("capacity", 0)) >= min_capacity)
                 and (include_out_of_service or table.get("status") == "active")]
        found.sort(key=lambda t: (int(t.get("capacity", 0)), str(t.get("table_id", ""))))
        return {"success": True, "data": found}

    def list_slots(self, on_date: Optional[str] = None, open_only: bool = False) -> dict:
        """List seatings with their booked covers, optionally for one date or only open ones.

        Args:
            on_date (Optional[str]): ISO date (YYYY-MM-DD) to list.
            open_only (bool): Only slots open for booking.

        Returns:
            dict: {"success": True, "data": List[ServiceSlotInfo plus "booked_covers"]} sorted by
            date and time, or {"success": False, "error": str}.
        """
        if on_date is not None and not isinstance(on_date, str):
            return {"success": False, "error": "on_date must be an ISO date string or null."}
        if not isinstance(open_only, bool):
            return {"success": False, "error": "open_only must be a boolean."}
        if on_date is not None:
            try:
                on_date = date.fromisoformat(on_date).isoformat()
            except ValueError:
                return {"success": False, "error": f"{on_date!r} is not an ISO date (YYYY-MM-DD)."}
        found = []
        for slot in self.slots.values():
            if on_date is not None and slot.get("date") != on_date:
                continue
            if open_only and slot.get("status") != "open":
                continue
            entry = dict(slot)
            entry["booked_covers"] = sum(int(r.get("party_size", 0)) for r in self.reservations.values()
                                         if r.get("slot_id") == slot.get("slot_id")
                                         and r.get("status") in ("booked", "seated"))
            found.append(entry)
        found.sort(key=lambda s: (str(s.get("date", "")), str(s.get("start_time", "")),
                                  str(s.get("slot_id", ""))))
        return {"success": True, "data": found}

    def find_slots_with_availability(self, party_size: int, on_date: str) -> dict:
        """List the open seatings of a date that can still take a party: enough covers left and at
        least one suitable free table.

        Args:
            party_size (int): Number of guests, 1 to 12.
            on_date (str): ISO date (YYYY-MM-DD).

        Returns:
            dict: {"success": True, "data": List[{"slot_id", "start_time", "covers_left",
            "free_tables": List[str]}]} sorted by time, or {"success": False, "error": str}.
        """
        if not isinstance(party_size, int) or isinstance(party_size, bool):
            return {"success": False, "error": "party_size must be an integer."}
        if not isinstance(on_date, str):
            return {"success": False, "error": "on_date must be an ISO date string."}
        if party_size < 1 or party_size > self.MAX_PARTY_SIZE:
            return {"success": False, "error": f"party_size must be between 1 and {self.MAX_PARTY_SIZE}."}
        try:
            day = date.fromisoformat(on_date).isoformat()
        except ValueError:
            return {"success": False, "error": f"{on_date!r} is not an ISO date (YYYY-MM-DD)."}
        found = []
        for slot in self.slots.values():
            if slot.get("date") != day or slot.get("status") != "open":
                continue
            active = [r for r in self.reservations.values()
                      if r.get("slot_id") == slot.get("slot_id") and r.get("status") in ("booked", "seated")]
            covers_left = int(slot.get("max_covers", 0)) - sum(int(r.get("party_size", 0)) for r in active)
            if covers_left < party_size:
                continue
            taken = {r.get("table_id") for r in active}
            free = sorted((t for t in self.tables.values()
                           if t.get("status") == "active" and t.get("table_id") not in taken
                           and (int(t.get("capacity", 0)) + 1) // 2 <= party_size <= int(t.get("capacity", 0))),
                          key=lambda t: (int(t.get("capacity", 0)), str(t.get("table_id", ""))))
            if not free:
                continue
            found.append({"slot_id": slot.get("slot_id"), "start_time": slot.get("start_time"),
                          "covers_left": covers_left, "free_tables": [t.get("table_id") for t in free]})
        found.sort(key=lambda entry: (str(entry["start_time"]), str(entry["slot_id"])))
        return {"success": True, "data": found}

    def get_slot_occupancy(self, slot_id: str) -> dict:
        """Report how full a seating is: covers booked and left, tables taken, waitlist length.

        Args:
            slot_id (str): The slot id, e.g. "S-0103-1930".

        Returns:
            dict: {"success": True, "data": {"slot_id", "date", "start_time", "status", "max_covers",
            "booked_covers", "covers_left", "tables_taken": List[str], "waiting": int}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(slot_id, str) or not slot_id.strip():
            return {"success": False, "error": "slot_id must be a non-empty string."}
        slot = self.slots.get(slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        active = [r for r in self.reservations.values()
                  if r.get("slot_id") == slot_id and r.get("status") in ("booked", "seated")]
        booked = sum(int(r.get("party_size", 0)) for r in active)
        waiting = sum(1 for entry in self.waitlist.values()
                      if entry.get("slot_id") == slot_id and entry.get("status") == "waiting")
        return {"success": True, "data": {
            "slot_id": slot_id, "date": slot.get("date"), "start_time": slot.get("start_time"),
            "status": slot.get("status"), "max_covers": int(slot.get("max_covers", 0)),
            "booked_covers": booked, "covers_left": int(slot.get("max_covers", 0)) - booked,
            "tables_taken": sorted(str(r.get("table_id")) for r in active), "waiting": waiting}}

    def find_available_tables(self, slot_id: str, party_size: int) -> dict:
        """List the active tables free in a seating that suit a party (size between half the
        capacity, rounded up, and the capacity), smallest first, and whether the slot still has
        covers for it.

        Args:
            slot_id (str): The slot id.
            party_size (int): Number of guests, 1 to 12.

        Returns:
            dict: {"success": True, "data": {"slot_id", "covers_left", "fits_covers" (bool),
            "tables": List[TableInfo]}}, or {"success": False, "error": str}.
        """
        if not isinstance(slot_id, str) or not slot_id.strip():
            return {"success": False, "error": "slot_id must be a non-empty string."}
        if not isinstance(party_size, int) or isinstance(party_size, bool):
            return {"success": False, "error": "party_size must be an integer."}
        if party_size < 1 or party_size > self.MAX_PARTY_SIZE:
            return {"success": False, "error": f"party_size must be between 1 and {self.MAX_PARTY_SIZE}."}
        slot = self.slots.get(slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        active = [r for r in self.reservations.values()
                  if r.get("slot_id") == slot_id and r.get("status") in ("booked", "seated")]
        covers_left = int(slot.get("max_covers", 0)) - sum(int(r.get("party_size", 0)) for r in active)
        taken = {r.get("table_id") for r in active}
        tables = sorted((dict(t) for t in self.tables.values()
                         if t.get("status") == "active" and t.get("table_id") not in taken
                         and (int(t.get("capacity", 0)) + 1) // 2 <= party_size <= int(t.get("capacity", 0))),
                        key=lambda t: (int(t.get("capacity", 0)), str(t.get("table_id", ""))))
        return {"success": True, "data": {"slot_id": slot_id, "covers_left": covers_left,
                                          "fits_covers": covers_left >= party_size, "tables": tables}}

    def get_reservation(self, reservation_id: str) -> dict:
        """Get a reservation by id, with its deposit if it has one.

        Args:
            reservation_id (str): The reservation id, e.g. "R-0012".

        Returns:
            dict: {"success": True, "data": ReservationInfo plus "deposit" (DepositInfo or None)},
            or {"success": False, "error": str}.
        """
        if not isinstance(reservation_id, str) or not reservation_id.strip():
            return {"success": False, "error": "reservation_id must be a non-empty string."}
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": f"Reservation {reservation_id} not found."}
        data = dict(reservation)
        deposits = sorted((d for d in self.deposits.values() if d.get("reservation_id") == reservation_id),
                          key=lambda d: str(d.get("deposit_id", "")))
        data["deposit"] = dict(deposits[-1]) if deposits else None
        return {"success": True, "data": data}

    def list_reservations(self, slot_id: Optional[str] = None, guest_id: Optional[str] = None,
                          status: Optional[str] = None, on_date: Optional[str] = None) -> dict:
        """List reservations, optionally filtered by slot, guest, status and date.

        Args:
            slot_id (Optional[str]): Only reservations in this slot.
            guest_id (Optional[str]): Only reservations of this guest.
            status (Optional[str]): "booked", "seated", "cancelled" or "no_show".
            on_date (Optional[str]): Only reservations for slots on this ISO date.

        Returns:
            dict: {"success": True, "data": List[ReservationInfo plus "date" and "start_time"]}
            sorted by date, time and id, or {"success": False, "error": str}.
        """
        for label, value in (("slot_id", slot_id), ("guest_id", guest_id), ("status", status),
                             ("on_date", on_date)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in self.RESERVATION_STATUSES:
            return {"success": False, "error": f"Unknown status {status!r}; use one of "
                                               f"{', '.join(self.RESERVATION_STATUSES)}."}
        if on_date is not None:
            try:
                on_date = date.fromisoformat(on_date).isoformat()
            except ValueError:
                return {"success": False, "error": f"{on_date!r} is not an ISO date (YYYY-MM-DD)."}
        found = []
        for reservation in self.reservations.values():
            slot = self.slots.get(reservation.get("slot_id"), {})
            if slot_id is not None and reservation.get("slot_id") != slot_id:
                continue
            if guest_id is not None and reservation.get("guest_id") != guest_id:
                continue
            if status is not None and reservation.get("status") != status:
                continue
            if on_date is not None and slot.get("date") != on_date:
                continue
            entry = dict(reservation)
            entry["date"] = slot.get("date")
            entry["start_time"] = slot.get("start_time")
            found.append(entry)
        found.sort(key=lambda r: (str(r.get("date")), str(r.get("start_time")), str(r.get("reservation_id"))))
        return {"success": True, "data": found}

    def get_waitlist(self, slot_id: str) -> dict:
        """List the guests waiting for a seating, first come first served.

        Args:
            slot_id (str): The slot id.

        Returns:
            dict: {"success": True, "data": List[WaitlistEntryInfo plus "guest_name"]} in the order
            they were added, or {"success": False, "error": str}.
        """
        if not isinstance(slot_id, str) or not slot_id.strip():
            return {"success": False, "error": "slot_id must be a non-empty string."}
        if slot_id not in self.slots:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        found = []
        for entry in self.waitlist.values():
            if entry.get("slot_id") != slot_id or entry.get("status") != "waiting":
                continue
            item = dict(entry)
            item["guest_name"] = self.guests.get(entry.get("guest_id"), {}).get("name")
            found.append(item)
        found.sort(key=lambda e: (str(e.get("added_at", "")), str(e.get("entry_id", ""))))
        return {"success": True, "data": found}

    def list_deposits(self, status: Optional[str] = None, reservation_id: Optional[str] = None) -> dict:
        """List deposits, optionally in one status or of one reservation.

        Args:
            status (Optional[str]): "pending", "held", "refunded", "forfeited", "applied" or "void".
            reservation_id (Optional[str]): Only deposits of this reservation.

        Returns:
            dict: {"success": True, "data": List[DepositInfo]} sorted by deposit_id, or
            {"success": False, "error": str}.
        """
        if status is not None and not isinstance(status, str):
            return {"success": False, "error": "status must be a string or null."}
        if reservation_id is not None and not isinstance(reservation_id, str):
            return {"success": False, "error": "reservation_id must be a string or null."}
        if status is not None and status not in self.DEPOSIT_STATUSES:
            return {"success": False, "error": f"Unknown deposit status {status!r}; use one of "
                                               f"{', '.join(self.DEPOSIT_STATUSES)}."}
        found = [dict(d) for d in self.deposits.values()
                 if (status is None or d.get("status") == status)
                 and (reservation_id is None or d.get("reservation_id") == reservation_id)]
        found.sort(key=lambda d: str(d.get("deposit_id", "")))
        return {"success": True, "data": found}

    def register_guest(self, name: str, phone: str, email: str, vip: bool = False) -> dict:
        """Register a new guest. Phone numbers are unique among guests.

        Args:
            name (str): The guest's full name.
            phone (str): Phone number (at least 7 digits).
            email (str): Email address (may be empty).
            vip (bool): Whether the guest is a VIP.

        Returns:
            dict: {"success": True, "message": str, "data": GuestInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(name, str) or not name.strip():
            return {"success": False, "error": "name must be a non-empty string."}
        if not isinstance(phone, str):
            return {"success": False, "error": "phone must be a string."}
        if not isinstance(email, str):
            return {"success": False, "error": "email must be a string."}
        if not isinstance(vip, bool):
            return {"success": False, "error": "vip must be a boolean."}
        phone = phone.strip()
        if sum(ch.isdigit() for ch in phone) < 7:
            return {"success": False, "error": f"{phone!r} is not a valid phone number."}
        email = email.strip()
        if email and ("@" not in email or " " in email):
            return {"success": False, "error": f"{email!r} is not a valid email address."}
        for guest in self.guests.values():
            if guest.get("phone") == phone:
                return {"success": False, "error": f"Phone {phone} already belongs to guest "
                                                   f"{guest.get('guest_id')} ({guest.get('name')})."}
        number = len(self.guests) + 1
        guest_id = f"G-{number:04d}"
        while guest_id in self.guests:
            number += 1
            guest_id = f"G-{number:04d}"
        record = {"guest_id": guest_id, "name": name.strip(), "phone": phone, "email": email,
                  "no_show_count": 0, "vip": vip}
        self.guests[guest_id] = record
        return {"success": True, "message": f"Guest {guest_id} registered.", "data": dict(record)}

    def create_reservation(self, guest_id: str, slot_id: str, table_id: str, party_size: int,
                           special_requests: str = "") -> dict:
        """Book a table in a seating for a guest.

        The slot must be open with enough covers left; the table active, free in that slot and
        suited to the party (at least half its capacity, rounded up, and at most its capacity); the
        guest must have fewer than 3 no-shows and no other booking in the slot. Parties of 6 or more
        and private-section tables need a deposit of 20.00 per guest, created "pending".

        Args:
            guest_id (str): The guest.
            slot_id (str): The seating.
            table_id (str): The table.
            party_size (int): Number of guests, 1 to 12.
            special_requests (str): Notes such as "high chair" or "birthday cake".

        Returns:
            dict: {"success": True, "message": str, "data": ReservationInfo plus "deposit"
            (DepositInfo or None)}, or {"success": False, "error": str}.
        """
        for label, value in (("guest_id", guest_id), ("slot_id", slot_id), ("table_id", table_id)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        if not isinstance(party_size, int) or isinstance(party_size, bool):
            return {"success": False, "error": "party_size must be an integer."}
        if not isinstance(special_requests, str):
            return {"success": False, "error": "special_requests must be a string."}
        guest = self.guests.get(guest_id)
        if guest is None:
            return {"success": False, "error": f"Guest {guest_id} not found."}
        slot = self.slots.get(slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        table = self.tables.get(table_id)
        if table is None:
            return {"success": False, "error": f"Table {table_id} not found."}
        if party_size < 1 or party_size > self.MAX_PARTY_SIZE:
            return {"success": False, "error": f"party_size must be between 1 and {self.MAX_PARTY_SIZE}."}
        if int(guest.get("no_show_count", 0)) >= self.MAX_NO_SHOWS:
            return {"success": False, "error": f"Guest {guest_id} has {guest.get('no_show_count')} "
                                               "no-shows and cannot book."}
        if slot.get("status") != "open":
            return {"success": False, "error": f"Slot {slot_id} is closed for bookings."}
        if table.get("status") != "active":
            return {"success": False, "error": f"Table {table_id} is out of service."}
        capacity = int(table.get("capacity", 0))
        if party_size > capacity or party_size < (capacity + 1) // 2:
            return {"success": False, "error": f"Table {table_id} seats parties of {(capacity + 1) // 2} "
                                               f"to {capacity}, not {party_size}."}
        active = [r for r in self.reservations.values()
                  if r.get("slot_id") == slot_id and r.get("status") in ("booked", "seated")]
        for other in active:
            if other.get("table_id") == table_id:
                return {"success": False, "error": f"Table {table_id} is already booked in slot {slot_id}."}
            if other.get("guest_id") == guest_id:
                return {"success": False, "error": f"Guest {guest_id} already has reservation "
                                                   f"{other.get('reservation_id')} in slot {slot_id}."}
        booked = sum(int(r.get("party_size", 0)) for r in active)
        if booked + party_size > int(slot.get("max_covers", 0)):
            return {"success": False, "error": f"Slot {slot_id} has only "
                                               f"{int(slot.get('max_covers', 0)) - booked} covers left."}
        now = datetime.now().isoformat(timespec="seconds")
        number = len(self.reservations) + 1
        reservation_id = f"R-{number:04d}"
        while reservation_id in self.reservations:
            number += 1
            reservation_id = f"R-{number:04d}"
        record = {"reservation_id": reservation_id, "guest_id": guest_id, "slot_id": slot_id,
                  "table_id": table_id, "party_size": party_size, "status": "booked",
                  "special_requests": special_requests.strip(), "created_at": now}
        self.reservations[reservation_id] = record
        deposit = None
        if party_size >= self.LARGE_PARTY_SIZE or table.get("section") == "private":
            number = len(self.deposits) + 1
            deposit_id = f"DEP-{number:04d}"
            while deposit_id in self.deposits:
                number += 1
                deposit_id = f"DEP-{number:04d}"
            deposit = {"deposit_id": deposit_id, "reservation_id": reservation_id,
                       "amount": round(party_size * self.DEPOSIT_PER_GUEST, 2), "status": "pending",
                       "method": None, "collected_at": None}
            self.deposits[deposit_id] = deposit
        data = dict(record)
        data["deposit"] = dict(deposit) if deposit is not None else None
        message = f"Reservation {reservation_id} booked at table {table_id}."
        if deposit is not None:
            message += f" A deposit of {deposit['amount']:.2f} ({deposit['deposit_id']}) is pending."
        return {"success": True, "message": message, "data": data}

    def modify_reservation(self, reservation_id: str, party_size: Optional[int] = None,
                           table_id: Optional[str] = None) -> dict:
        """Change the party size and/or the table of a booked reservation (same seating).

        The rules of booking apply again (table suited and free, covers, deposit). A pending deposit
        is re-priced or voided; a held deposit is refunded when no deposit is needed any more; a
        deposit is created "pending" when one becomes necessary.

        Args:
            reservation_id (str): The booked reservation.
            party_size (Optional[int]): The new number of guests.
            table_id (Optional[str]): The new table.

        Returns:
            dict: {"success": True, "message": str, "data": ReservationInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(reservation_id, str) or not reservation_id.strip():
            return {"success": False, "error": "reservation_id must be a non-empty string."}
        if party_size is not None and (not isinstance(party_size, int) or isinstance(party_size, bool)):
            return {"success": False, "error": "party_size must be an integer or null."}
        if table_id is not None and not isinstance(table_id, str):
            return {"success": False, "error": "table_id must be a string or null."}
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": f"Reservation {reservation_id} not found."}
        if reservation.get("status") != "booked":
            return {"success": False, "error": f"Reservation {reservation_id} is "
                                               f"{reservation.get('status')}; only booked ones change."}
        if party_size is None and table_id is None:
            return {"success": False, "error": "Give a new party_size, a new table_id, or both."}
        new_size = party_size if party_size is not None else int(reservation.get("party_size", 0))
        new_table_id = table_id if table_id is not None else reservation.get("table_id")
        if new_size < 1 or new_size > self.MAX_PARTY_SIZE:
            return {"success": False, "error": f"party_size must be between 1 and {self.MAX_PARTY_SIZE}."}
        table = self.tables.get(new_table_id)
        if table is None:
            return {"success": False, "error": f"Table {new_table_id} not found."}
        if table.get("status") != "active":
            return {"success": False, "error": f"Table {new_table_id} is out of service."}
        capacity = int(table.get("capacity", 0))
        if new_size > capacity or new_size < (capacity + 1) // 2:
            return {"success": False, "error": f"Table {new_table_id} seats parties of "
                                               f"{(capacity + 1) // 2} to {capacity}, not {new_size}."}
        slot = self.slots.get(reservation.get("slot_id"), {})
        others = [r for r in self.reservations.values()
                  if r.get("slot_id") == reservation.get("slot_id") and r.get("status") in ("booked", "seated")
                  and r.get("reservation_id") != reservation_id]
        if any(r.get("table_id") == new_table_id for r in others):
            return {"success": False, "error": f"Table {new_table_id} is already booked in that slot."}
        booked = sum(int(r.get("party_size", 0)) for r in others)
        if booked + new_size > int(slot.get("max_covers", 0)):
            return {"success": False, "error": f"The slot has only {int(slot.get('max_covers', 0)) - booked} "
                                               "covers left for this party."}
        reservation["party_size"] = new_size
        reservation["table_id"] = new_table_id
        needs = new_size >= self.LARGE_PARTY_SIZE or table.get("section") == "private"
        current = [d for d in self.deposits.values() if d.get("reservation_id") == reservation_id
                   and d.get("status") in ("pending", "held")]
        notes = []
        if needs and not current:
            number = len(self.deposits) + 1
            deposit_id = f"DEP-{number:04d}"
            while deposit_id in self.deposits:
                number += 1
                deposit_id = f"DEP-{number:04d}"
            self.deposits[deposit_id] = {"deposit_id": deposit_id, "reservation_id": reservation_id,
                                         "amount": round(new_size * self.DEPOSIT_PER_GUEST, 2),
                                         "status": "pending", "method": None, "collected_at": None}
            notes.append(f"deposit {deposit_id} of {new_size * self.DEPOSIT_PER_GUEST:.2f} is now pending")
        for deposit in current:
            if not needs:
                deposit["status"] = "void" if deposit.get("status") == "pending" else "refunded"
                notes.append(f"deposit {deposit.get('deposit_id')} {deposit['status']}")
            elif deposit.get("status") == "pending":
                deposit["amount"] = round(new_size * self.DEPOSIT_PER_GUEST, 2)
                notes.append(f"deposit {deposit.get('deposit_id')} re-priced to {deposit['amount']:.2f}")
        message = f"Reservation {reservation_id}: party of {new_size} at table {new_table_id}."
        if notes:
            message += " Note: " + "; ".join(notes) + "."
        return {"success": True, "message": message, "data": dict(reservation)}

    def cancel_reservation(self, reservation_id: str) -> dict:
        """Cancel a booked reservation. A held deposit is refunded when the seating starts at least
        24 hours from now, otherwise forfeited; a pending deposit becomes void. The first guest on the
        waitlist is not booked automatically.

        Args:
            reservation_id (str): The booked reservation.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(reservation_id, str) or not reservation_id.strip():
            return {"success": False, "error": "reservation_id must be a non-empty string."}
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": f"Reservation {reservation_id} not found."}
        if reservation.get("status") != "booked":
            return {"success": False, "error": f"Reservation {reservation_id} is "
                                               f"{reservation.get('status')}; only booked ones can be cancelled."}
        slot = self.slots.get(reservation.get("slot_id"), {})
        try:
            start = datetime.fromisoformat(f"{slot.get('date')}T{slot.get('start_time')}")
        except ValueError:
            return {"success": False, "error": "The reservation's slot has an invalid date or time."}
        hours_ahead = (start - datetime.now()).total_seconds() / 3600
        reservation["status"] = "cancelled"
        notes = []
        for deposit in self.deposits.values():
            if deposit.get("reservation_id") != reservation_id:
                continue
            if deposit.get("status") == "pending":
                deposit["status"] = "void"
            elif deposit.get("status") == "held":
                deposit["status"] = "refunded" if hours_ahead >= self.FREE_CANCELLATION_HOURS else "forfeited"
            else:
                continue
            notes.append(f"deposit {deposit.get('deposit_id')} {deposit['status']}")
        message = f"Reservation {reservation_id} cancelled."
        if notes:
            message += " Note: " + "; ".join(notes) + "."
        return {"success": True, "message": message}

    def collect_deposit(self, reservation_id: str, method: str) -> dict:
        """Collect the pending deposit of a booked reservation, which then becomes "held".

        Args:
            reservation_id (str): The reservation.
            method (str): "card" or "cash".

        Returns:
            dict: {"success": True, "message": str, "data": DepositInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(reservation_id, str) or not reservation_id.strip():
            return {"success": False, "error": "reservation_id must be a non-empty string."}
        if not isinstance(method, str):
            return {"success": False, "error": "method must be a string."}
        if method not in self.DEPOSIT_METHODS:
            return {"success": False, "error": f"Unknown method {method!r}; use 'card' or 'cash'."}
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": f"Reservation {reservation_id} not found."}
        if reservation.get("status") != "booked":
            return {"success": False, "error": f"Reservation {reservation_id} is {reservation.get('status')}."}
        pending = sorted((d for d in self.deposits.values()
                          if d.get("reservation_id") == reservation_id and d.get("status") == "pending"),
                         key=lambda d: str(d.get("deposit_id", "")))
        if not pending:
            return {"success": False, "error": f"Reservation {reservation_id} has no pending deposit."}
        deposit = pending[0]
        deposit["status"] = "held"
        deposit["method"] = method
        deposit["collected_at"] = datetime.now().isoformat(timespec="seconds")
        return {"success": True, "message": f"Deposit {deposit.get('deposit_id')} of "
                                            f"{float(deposit.get('amount', 0.0)):.2f} collected by {method}.",
                "data": dict(deposit)}

    def seat_reservation(self, reservation_id: str) -> dict:
        """Seat a booked party on the day of its seating. A pending deposit must be collected first;
        a held deposit is applied to the bill.

        Args:
            reservation_id (str): The booked reservation.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(reservation_id, str) or not reservation_id.strip():
            return {"success": False, "error": "reservation_id must be a non-empty string."}
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": f"Reservation {reservation_id} not found."}
        if reservation.get("status") != "booked":
            return {"success": False, "error": f"Reservation {reservation_id} is {reservation.get('status')}."}
        slot = self.slots.get(reservation.get("slot_id"), {})
        today = datetime.now().date().isoformat()
        if slot.get("date") != today:
            return {"success": False, "error": f"Reservation {reservation_id} is for {slot.get('date')}; "
                                               f"parties are seated on the day (today is {today})."}
        deposits = [d for d in self.deposits.values() if d.get("reservation_id") == reservation_id]
        if any(d.get("status") == "pending" for d in deposits):
            return {"success": False, "error": "The deposit must be collected before seating."}
        for deposit in deposits:
            if deposit.get("status") == "held":
                deposit["status"] = "applied"
        reservation["status"] = "seated"
        return {"success": True, "message": f"Reservation {reservation_id} seated at table "
                                            f"{reservation.get('table_id')}."}

    def mark_no_show(self, reservation_id: str) -> dict:
        """Mark a booked reservation as a no-show once its seating has started: the guest's no-show
        count goes up by one, a held deposit is forfeited and a pending one becomes void.

        Args:
            reservation_id (str): The booked reservation.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(reservation_id, str) or not reservation_id.strip():
            return {"success": False, "error": "reservation_id must be a non-empty string."}
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": f"Reservation {reservation_id} not found."}
        if reservation.get("status") != "booked":
            return {"success": False, "error": f"Reservation {reservation_id} is {reservation.get('status')}."}
        slot = self.slots.get(reservation.get("slot_id"), {})
        try:
            start = datetime.fromisoformat(f"{slot.get('date')}T{slot.get('start_time')}")
        except ValueError:
            return {"success": False, "error": "The reservation's slot has an invalid date or time."}
        if start > datetime.now():
            return {"success": False, "error": f"The seating starts at {start.isoformat(timespec='minutes')}; "
                                               "a no-show can only be marked after it has started."}
        reservation["status"] = "no_show"
        guest = self.guests.get(reservation.get("guest_id"))
        if guest is not None:
            guest["no_show_count"] = int(guest.get("no_show_count", 0)) + 1
        for deposit in self.deposits.values():
            if deposit.get("reservation_id") != reservation_id:
                continue
            if deposit.get("status") == "held":
                deposit["status"] = "forfeited"
            elif deposit.get("status") == "pending":
                deposit["status"] = "void"
        return {"success": True, "message": f"Reservation {reservation_id} marked as a no-show."}

    def add_to_waitlist(self, guest_id: str, slot_id: str, party_size: int) -> dict:
        """Put a guest on the waitlist of an open seating (one waiting entry per guest and slot,
        not for guests already booked in it).

        Args:
            guest_id (str): The guest.
            slot_id (str): The seating.
            party_size (int): Number of guests, 1 to 12.

        Returns:
            dict: {"success": True, "message": str, "data": WaitlistEntryInfo plus "position"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(guest_id, str) or not guest_id.strip():
            return {"success": False, "error": "guest_id must be a non-empty string."}
        if not isinstance(slot_id, str) or not slot_id.strip():
            return {"success": False, "error": "slot_id must be a non-empty string."}
        if not isinstance(party_size, int) or isinstance(party_size, bool):
            return {"success": False, "error": "party_size must be an integer."}
        guest = self.guests.get(guest_id)
        if guest is None:
            return {"success": False, "error": f"Guest {guest_id} not found."}
        slot = self.slots.get(slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        if slot.get("status") != "open":
            return {"success": False, "error": f"Slot {slot_id} is closed."}
        if party_size < 1 or party_size > self.MAX_PARTY_SIZE:
            return {"success": False, "error": f"party_size must be between 1 and {self.MAX_PARTY_SIZE}."}
        for entry in self.waitlist.values():
            if entry.get("guest_id") == guest_id and entry.get("slot_id") == slot_id \
                    and entry.get("status") == "waiting":
                return {"success": False, "error": f"Guest {guest_id} is already waiting "
                                                   f"({entry.get('entry_id')})."}
        for reservation in self.reservations.values():
            if reservation.get("guest_id") == guest_id and reservation.get("slot_id") == slot_id \
                    and reservation.get("status") in ("booked", "seated"):
                return {"success": False, "error": f"Guest {guest_id} already has reservation "
                                                   f"{reservation.get('reservation_id')} in this slot."}
        number = len(self.waitlist) + 1
        entry_id = f"W-{number:04d}"
        while entry_id in self.waitlist:
            number += 1
            entry_id = f"W-{number:04d}"
        record = {"entry_id": entry_id, "guest_id": guest_id, "slot_id": slot_id,
                  "party_size": party_size, "status": "waiting",
                  "added_at": datetime.now().isoformat(timespec="seconds")}
        self.waitlist[entry_id] = record
        position = sum(1 for entry in self.waitlist.values()
                       if entry.get("slot_id") == slot_id and entry.get("status") == "waiting")
        data = dict(record)
        data["position"] = position
        return {"success": True, "message": f"{guest.get('name')} is number {position} on the waitlist "
                                            f"({entry_id}).", "data": data}

    def promote_waitlist_entry(self, entry_id: str, table_id: str) -> dict:
        """Book a table for a waiting entry under the booking rules (fit, covers, no-shows,
        deposit); the entry becomes "promoted".

        Args:
            entry_id (str): The waiting entry.
            table_id (str): The table to book.

        Returns:
            dict: {"success": True, "message": str, "data": ReservationInfo plus "deposit"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(entry_id, str) or not entry_id.strip():
            return {"success": False, "error": "entry_id must be a non-empty string."}
        if not isinstance(table_id, str) or not table_id.strip():
            return {"success": False, "error": "table_id must be a non-empty string."}
        entry = self.waitlist.get(entry_id)
        if entry is None:
            return {"success": False, "error": f"Waitlist entry {entry_id} not found."}
        if entry.get("status") != "waiting":
            return {"success": False, "error": f"Waitlist entry {entry_id} is {entry.get('status')}."}
        guest = self.guests.get(entry.get("guest_id"))
        slot = self.slots.get(entry.get("slot_id"))
        table = self.tables.get(table_id)
        if guest is None or slot is None:
            return {"success": False, "error": "The entry's guest or slot no longer exists."}
        if table is None:
            return {"success": False, "error": f"Table {table_id} not found."}
        party_size = int(entry.get("party_size", 0))
        if int(guest.get("no_show_count", 0)) >= self.MAX_NO_SHOWS:
            return {"success": False, "error": f"Guest {guest.get('guest_id')} has too many no-shows to book."}
        if slot.get("status") != "open":
            return {"success": False, "error": f"Slot {slot.get('slot_id')} is closed."}
        if table.get("status") != "active":
            return {"success": False, "error": f"Table {table_id} is out of service."}
        capacity = int(table.get("capacity", 0))
        if party_size > capacity or party_size < (capacity + 1) // 2:
            return {"success": False, "error": f"Table {table_id} seats parties of {(capacity + 1) // 2} "
                                               f"to {capacity}, not {party_size}."}
        active = [r for r in self.reservations.values()
                  if r.get("slot_id") == slot.get("slot_id") and r.get("status") in ("booked", "seated")]
        if any(r.get("table_id") == table_id for r in active):
            return {"success": False, "error": f"Table {table_id} is already booked in that slot."}
        if any(r.get("guest_id") == guest.get("guest_id") for r in active):
            return {"success": False, "error": "The guest already has a booking in that slot."}
        booked = sum(int(r.get("party_size", 0)) for r in active)
        if booked + party_size > int(slot.get("max_covers", 0)):
            return {"success": False, "error": f"Slot {slot.get('slot_id')} has only "
                                               f"{int(slot.get('max_covers', 0)) - booked} covers left."}
        number = len(self.reservations) + 1
        reservation_id = f"R-{number:04d}"
        while reservation_id in self.reservations:
            number += 1
            reservation_id = f"R-{number:04d}"
        record = {"reservation_id": reservation_id, "guest_id": guest.get("guest_id"),
                  "slot_id": slot.get("slot_id"), "table_id": table_id, "party_size": party_size,
                  "status": "booked", "special_requests": "From the waitlist",
                  "created_at": datetime.now().isoformat(timespec="seconds")}
        self.reservations[reservation_id] = record
        deposit = None
        if party_size >= self.LARGE_PARTY_SIZE or table.get("section") == "private":
            number = len(self.deposits) + 1
            deposit_id = f"DEP-{number:04d}"
            while deposit_id in self.deposits:
                number += 1
                deposit_id = f"DEP-{number:04d}"
            deposit = {"deposit_id": deposit_id, "reservation_id": reservation_id,
                       "amount": round(party_size * self.DEPOSIT_PER_GUEST, 2), "status": "pending",
                       "method": None, "collected_at": None}
            self.deposits[deposit_id] = deposit
        entry["status"] = "promoted"
        data = dict(record)
        data["deposit"] = dict(deposit) if deposit is not None else None
        return {"success": True, "message": f"Waitlist entry {entry_id} booked as {reservation_id} at "
                                            f"table {table_id}.", "data": data}

    def remove_waitlist_entry(self, entry_id: str) -> dict:
        """Take a waiting entry off the waitlist.

        Args:
            entry_id (str): The waiting entry.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(entry_id, str) or not entry_id.strip():
            return {"success": False, "error": "entry_id must be a non-empty string."}
        entry = self.waitlist.get(entry_id)
        if entry is None:
            return {"success": False, "error": f"Waitlist entry {entry_id} not found."}
        if entry.get("status") != "waiting":
            return {"success": False, "error": f"Waitlist entry {entry_id} is {entry.get('status')}."}
        entry["status"] = "removed"
        return {"success": True, "message": f"Waitlist entry {entry_id} removed."}
