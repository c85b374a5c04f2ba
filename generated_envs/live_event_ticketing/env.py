from datetime import datetime, timedelta
from typing import Dict, List, Optional, TypedDict


class VenueInfo(TypedDict):
    venue_id: str
    name: str
    city: str
    capacity: int


class EventInfo(TypedDict):
    event_id: str
    name: str
    venue_id: str
    starts_at: str  # ISO 8601 date-time
    status: str  # "on_sale" | "sales_closed" | "cancelled" | "completed"
    refund_cutoff_hours: int  # refunds close this many hours before the start
    max_tickets_per_attendee: int


class TierInfo(TypedDict):
    tier_id: str
    event_id: str
    name: str  # e.g. "General Admission", "VIP"
    price: float
    capacity: int
    sold: int  # tickets sold and not refunded, including archived orders
    status: str  # "on_sale" | "closed"


class AttendeeInfo(TypedDict):
    attendee_id: str
    name: str
    email: str
    status: str  # "active" | "banned"


class OrderInfo(TypedDict):
    order_id: str
    attendee_id: str  # the buyer
    event_id: str
    tier_id: str
    quantity: int
    unit_price: float
    status: str  # "held" | "confirmed" | "partially_refunded" | "refunded" | "released" | "expired"
    created_at: str  # ISO 8601 date-time
    expires_at: Optional[str]  # end of the hold
    payment_reference: Optional[str]
    ticket_ids: List[str]
    refunded_amount: float


class TicketInfo(TypedDict):
    ticket_id: str
    order_id: str
    event_id: str
    tier_id: str
    holder_id: str  # the attendee who holds the ticket now
    status: str  # "valid" | "refunded"
    transfer_count: int


class LiveEventTicketing:
    HOLD_MINUTES = 15
    MAX_TRANSFERS_PER_TICKET = 2

    def __init__(self, init_config: dict):
        # Venues, by venue_id.
        self.venues: Dict[str, VenueInfo] = {}
        # Events, by event_id.
        self.events: Dict[str, EventInfo] = {}
        # Ticket tiers of the events, by tier_id.
        self.tiers: Dict[str, TierInfo] = {}
        # Attendees (customer accounts), by attendee_id.
        self.attendees: Dict[str, AttendeeInfo] = {}
        # Orders, from hold to purchase and refund, by order_id.
        self.orders: Dict[str, OrderInfo] = {}
        # Issued tickets, by ticket_id.
        self.tickets: Dict[str, TicketInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - An event takes place at an existing venue; the capacities of its tiers add up to at
        #   most the venue's capacity.
        # - A tier's available tickets are its capacity minus tickets sold minus tickets in active
        #   holds (held orders whose expires_at is still ahead); holds never exceed availability.
        # - Only on-sale tiers of on-sale events that have not started can be held, and only by
        #   active attendees.
        # - An attendee may have at most max_tickets_per_attendee tickets of one event, counting
        #   valid tickets they hold and their active holds.
        # - A hold lasts HOLD_MINUTES (15); confirming it with a payment reference before it
        #   expires issues its tickets (<order_id>-1, -2, ...), adds them to the tier's sold count
        #   and makes the order confirmed. Expired or released holds cannot be confirmed.
        # - A valid ticket can be refunded only while its buyer still holds it and only before
        #   the event's refund cutoff (starts_at minus refund_cutoff_hours); the unit price goes
        #   back to the order's refunded_amount and the seat returns to the tier.
        # - A valid ticket can be transferred to another active attendee until the event starts,
        #   at most MAX_TRANSFERS_PER_TICKET (2) times; the recipient's ticket limit applies.
        # - Cancelling an event refunds every valid ticket, releases its holds, closes its tiers.
        # - A tier's capacity never drops below sold plus held tickets; price changes apply to
        #   new holds only.

    def list_events(self, city: Optional[str] = None, status: Optional[str] = None,
                    date_from: Optional[str] = None) -> dict:
        """List events with their venue, filtered by city, status and/or first day.

        Args:
            city (Optional[str]): Only events at venues in this city (case-insensitive).
            status (Optional[str]): "on_sale", "sales_closed", "cancelled" or "completed".
            date_from (Optional[str]): Only events starting on or after this day (YYYY-MM-DD).

        Returns:
            dict: {"success": True, "data": [EventInfo plus "venue_name" and "city"]} sorted by
            start, or {"success": False, "error": str}.
        """
        for label, value in (("city", city), ("status", status), ("date_from", date_from)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in ("on_sale", "sales_closed", "cancelled", "completed"):
            return {"success": False, "error": "status must be on_sale, sales_closed, cancelled or completed."}
        day = None
        if date_from is not None:
            try:
                day = datetime.fromisoformat(date_from.strip()).date().isoformat()
            except ValueError:
                return {"success": False, "error": f"Invalid date_from {date_from!r}; use YYYY-MM-DD."}
        found = []
        for event in self.events.values():
            venue = self.venues.get(event["venue_id"])
            if city is not None and (venue is None or venue["city"].lower() != city.strip().lower()):
                continue
            if status is not None and event["status"] != status:
                continue
            if day is not None and event["starts_at"][:10] < day:
                continue
            entry = dict(event)
            entry["venue_name"] = venue["name"] if venue else None
            entry["city"] = venue["city"] if venue else None
            found.append(entry)
        found.sort(key=lambda entry: (entry["starts_at"], entry["event_id"]))
        return {"success": True, "data": found}

    def get_event(self, event_id: str) -> dict:
        """Get an event with its venue, its refund cutoff and every tier's availability.

        Args:
            event_id (str): The event id, e.g. "EV-301".

        Returns:
            dict: {"success": True, "data": EventInfo plus "venue", "refund_cutoff" and "tiers"
            (TierInfo plus "held" and "available")}, or {"success": False, "error": str}.
        """
        if not isinstance(event_id, str) or not event_id.strip():
            return {"success": False, "error": "event_id must be a non-empty string."}
        event = self.events.get(event_id)
        if event is None:
            return {"success": False, "error": f"Event {event_id} not found."}
        now = datetime.now()
        tiers = []
        for tier_id in sorted(self.tiers):
            tier = self.tiers[tier_id]
            if tier["event_id"] != event_id:
                continue
            held = 0
            for order in self.orders.values():
                if order["tier_id"] == tier_id and order["status"] == "held" and order["expires_at"]:
                    try:
                        if datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) > now:
                            held += order["quantity"]
                    except ValueError:
                        continue
            entry = dict(tier)
            entry["held"] = held
            entry["available"] = max(tier["capacity"] - tier["sold"] - held, 0)
            tiers.append(entry)
        data = dict(event)
        venue = self.venues.get(event["venue_id"])
        data["venue"] = dict(venue) if venue else None
        try:
            start = datetime.fromisoformat(event["starts_at"]).replace(tzinfo=None)
            data["refund_cutoff"] = (start - timedelta(hours=event["refund_cutoff_hours"])).isoformat()
        except (TypeError, ValueError):
            data["refund_cutoff"] = None
        data["tiers"] = tiers
        return {"success": True, "data": data}

    def get_tier_availability(self, tier_id: str) -> dict:
        """Get a ticket tier's capacity, tickets sold, tickets in active holds and tickets
        available now.

        Args:
            tier_id (str): The tier id, e.g. "TR-301-GA".

        Returns:
            dict: {"success": True, "data": TierInfo plus "held" and "available"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(tier_id, str) or not tier_id.strip():
            return {"success": False, "error": "tier_id must be a non-empty string."}
        tier = self.tiers.get(tier_id)
        if tier is None:
            return {"success": False, "error": f"Tier {tier_id} not found."}
        now = datetime.now()
        held = 0
        for order in self.orders.values():
            if order["tier_id"] == tier_id and order["status"] == "held" and order["expires_at"]:
                try:
                    if datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) > now:
                        held += order["quantity"]
                except ValueError:
                    continue
        data = dict(tier)
        data["held"] = held
        data["available"] = max(tier["capacity"] - tier["sold"] - held, 0)
        return {"success": True, "data": data}

    def find_attendees(self, query: str) -> dict:
        """Find attendees whose name or email contains the text (case-insensitive).

        Args:
            query (str): Part of a name or email address.

        Returns:
            dict: {"success": True, "data": [AttendeeInfo, ...]} sorted by id, or
            {"success": False, "error": str}.
        """
        if not isinstance(query, str) or not query.strip():
            return {"success": False, "error": "query must be a non-empty string."}
        needle = query.strip().lower()
        found = [dict(self.attendees[attendee_id]) for attendee_id in sorted(self.attendees)
                 if needle in self.attendees[attendee_id]["name"].lower()
                 or needle in self.attendees[attendee_id]["email"].lower()]
        return {"success": True, "data": found}

    def get_attendee(self, attendee_id: str) -> dict:
        """Get an attendee with the number of valid tickets they hold and of their orders.

        Args:
            attendee_id (str): The attendee id, e.g. "ATT-0012".

        Returns:
            dict: {"success": True, "data": AttendeeInfo plus "valid_tickets" and "orders"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(attendee_id, str) or not attendee_id.strip():
            return {"success": False, "error": "attendee_id must be a non-empty string."}
        attendee = self.attendees.get(attendee_id)
        if attendee is None:
            return {"success": False, "error": f"Attendee {attendee_id} not found."}
        data = dict(attendee)
        data["valid_tickets"] = sum(1 for t in self.tickets.values()
                                    if t["holder_id"] == attendee_id and t["status"] == "valid")
        data["orders"] = sum(1 for o in self.orders.values() if o["attendee_id"] == attendee_id)
        return {"success": True, "data": data}

    def get_order(self, order_id: str) -> dict:
        """Get an order; a held order also says whether its hold is still active.

        Args:
            order_id (str): The order id, e.g. "ORD-0042".

        Returns:
            dict: {"success": True, "data": OrderInfo plus "hold_active" (bool)}, or
            {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not order_id.strip():
            return {"success": False, "error": "order_id must be a non-empty string."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        data = dict(order)
        data["ticket_ids"] = list(order["ticket_ids"])
        active = False
        if order["status"] == "held" and order["expires_at"]:
            try:
                active = datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) > datetime.now()
            except ValueError:
                active = False
        data["hold_active"] = active
        return {"success": True, "data": data}

    def list_attendee_orders(self, attendee_id: str, status: Optional[str] = None) -> dict:
        """List the orders an attendee placed, optionally of one status.

        Args:
            attendee_id (str): The buyer's attendee id.
            status (Optional[str]): "held", "confirmed", "partially_refunded", "refunded",
                "released" or "expired".

        Returns:
            dict: {"success": True, "data": [OrderInfo, ...]} sorted by creation time, or
            {"success": False, "error": str}.
        """
        if not isinstance(attendee_id, str) or not attendee_id.strip():
            return {"success": False, "error": "attendee_id must be a non-empty string."}
        if status is not None and not isinstance(status, str):
            return {"success": False, "error": "status must be a string or null."}
        if attendee_id not in self.attendees:
            return {"success": False, "error": f"Attendee {attendee_id} not found."}
        found = []
        for order in self.orders.values():
            if order["attendee_id"] != attendee_id or (status is not None and order["status"] != status):
                continue
            entry = dict(order)
            entry["ticket_ids"] = list(order["ticket_ids"])
            found.append(entry)
        found.sort(key=lambda entry: (entry["created_at"], entry["order_id"]))
        return {"success": True, "data": found}

    def list_attendee_tickets(self, attendee_id: str, event_id: Optional[str] = None) -> dict:
        """List the tickets an attendee holds now (including refunded ones), optionally for one
        event.

        Args:
            attendee_id (str): The holder's attendee id.
            event_id (Optional[str]): Only tickets of this event.

        Returns:
            dict: {"success": True, "data": [TicketInfo plus "event_name" and "tier_name"]}
            sorted by id, or {"success": False, "error": str}.
        """
        if not isinstance(attendee_id, str) or not attendee_id.strip():
            return {"success": False, "error": "attendee_id must be a non-empty string."}
        if event_id is not None and not isinstance(event_id, str):
            return {"success": False, "error": "event_id must be a string or null."}
        if attendee_id not in self.attendees:
            return {"success": False, "error": f"Attendee {attendee_id} not found."}
        found = []
        for ticket_id in sorted(self.tickets):
            ticket = self.tickets[ticket_id]
            if ticket["holder_id"] != attendee_id or (event_id is not None and ticket["event_id"] != event_id):
                continue
            entry = dict(ticket)
            event = self.events.get(ticket["event_id"])
            tier = self.tiers.get(ticket["tier_id"])
            entry["event_name"] = event["name"] if event else None
            entry["tier_name"] = tier["name"] if tier else None
            found.append(entry)
        return {"success": True, "data": found}

    def get_ticket(self, ticket_id: str) -> dict:
        """Get a ticket with its buyer and holder.

        Args:
            ticket_id (str): The ticket id, e.g. "ORD-0042-1".

        Returns:
            dict: {"success": True, "data": TicketInfo plus "buyer_id"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not ticket_id.strip():
            return {"success": False, "error": "ticket_id must be a non-empty string."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        data = dict(ticket)
        order = self.orders.get(ticket["order_id"])
        data["buyer_id"] = order["attendee_id"] if order else None
        return {"success": True, "data": data}

    def check_refund_eligibility(self, ticket_id: str) -> dict:
        """Explain whether a ticket can be refunded now, the amount, and the refund cutoff.

        Args:
            ticket_id (str): The ticket.

        Returns:
            dict: {"success": True, "data": {"eligible": bool, "reasons": [str],
            "refund_amount": float, "refund_cutoff": str}}, or {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not ticket_id.strip():
            return {"success": False, "error": "ticket_id must be a non-empty string."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        order = self.orders.get(ticket["order_id"])
        event = self.events.get(ticket["event_id"])
        if order is None or event is None:
            return {"success": False, "error": f"Ticket {ticket_id} refers to a missing order or event."}
        try:
            start = datetime.fromisoformat(event["starts_at"]).replace(tzinfo=None)
        except (TypeError, ValueError):
            return {"success": False, "error": f"Event {event['event_id']} has an invalid start."}
        cutoff = start - timedelta(hours=event["refund_cutoff_hours"])
        reasons = []
        if ticket["status"] != "valid":
            reasons.append(f"the ticket is {ticket['status']}")
        if ticket["holder_id"] != order["attendee_id"]:
            reasons.append("the ticket was transferred away from its buyer")
        if event["status"] == "cancelled":
            reasons.append("the event is cancelled (its tickets were refunded)")
        if datetime.now() >= cutoff:
            reasons.append(f"the refund cutoff {cutoff.isoformat()} has passed")
        return {"success": True, "data": {"eligible": not reasons, "reasons": reasons,
                                          "refund_amount": order["unit_price"],
                                          "refund_cutoff": cutoff.isoformat()}}

    def list_event_holds(self, event_id: str, include_expired: bool = True) -> dict:
        """List the held orders of an event, each flagged as active or expired.

        Args:
            event_id (str): The event.
            include_expired (bool): Also list holds whose time has run out.

        Returns:
            dict: {"success": True, "data": [OrderInfo plus "hold_active"]} sorted by expiry,
            or {"success": False, "error": str}.
        """
        if not isinstance(event_id, str) or not event_id.strip():
            return {"success": False, "error": "event_id must be a non-empty string."}
        if not isinstance(include_expired, bool):
            return {"success": False, "error": "include_expired must be a boolean."}
        if event_id not in self.events:
            return {"success": False, "error": f"Event {event_id} not found."}
        now = datetime.now()
        found = []
        for order in self.orders.values():
            if order["event_id"] != event_id or order["status"] != "held":
                continue
            try:
                active = bool(order["expires_at"]) and datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) > now
            except ValueError:
                active = False
            if not active and not include_expired:
                continue
            entry = dict(order)
            entry["ticket_ids"] = list(order["ticket_ids"])
            entry["hold_active"] = active
            found.append(entry)
        found.sort(key=lambda entry: (entry["expires_at"] or "", entry["order_id"]))
        return {"success": True, "data": found}

    def register_attendee(self, name: str, email: str) -> dict:
        """Create an attendee account. Attendee ids are given in order: ATT-0001, ATT-0002, ...
        (the next free number after the count of attendees).

        Args:
            name (str): Full name.
            email (str): Email address, unique among attendees (must contain "@").

        Returns:
            dict: {"success": True, "message": str, "data": {"attendee_id": str}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(name, str) or not name.strip():
            return {"success": False, "error": "name must be a non-empty string."}
        if not isinstance(email, str) or "@" not in email:
            return {"success": False, "error": "email must be an email address."}
        address = email.strip().lower()
        for attendee in self.attendees.values():
            if attendee["email"].lower() == address:
                return {"success": False, "error": f"The email is already registered to {attendee['attendee_id']}."}
        number = len(self.attendees) + 1
        while f"ATT-{number:04d}" in self.attendees:
            number += 1
        attendee_id = f"ATT-{number:04d}"
        self.attendees[attendee_id] = {"attendee_id": attendee_id, "name": name.strip(),
                                       "email": address, "status": "active"}
        return {"success": True, "message": f"Attendee {attendee_id} registered.",
                "data": {"attendee_id": attendee_id}}

    def hold_tickets(self, attendee_id: str, tier_id: str, quantity: int) -> dict:
        """Hold tickets of a tier for an attendee for 15 minutes at the tier's current price,
        creating a held order. Order ids are given in order: ORD-0001, ORD-0002, ... (the next
        free number after the count of orders).

        Args:
            attendee_id (str): An active attendee (the buyer).
            tier_id (str): An on-sale tier of an on-sale event that has not started.
            quantity (int): Tickets to hold, at least 1, within availability and the attendee's
                limit for the event.

        Returns:
            dict: {"success": True, "message": str, "data": {"order_id": str, "expires_at": str,
            "total": float}}, or {"success": False, "error": str}.
        """
        if not isinstance(attendee_id, str) or not isinstance(tier_id, str):
            return {"success": False, "error": "attendee_id and tier_id must be strings."}
        if isinstance(quantity, bool) or not isinstance(quantity, int):
            return {"success": False, "error": "quantity must be an integer."}
        if quantity < 1:
            return {"success": False, "error": "quantity must be at least 1."}
        attendee = self.attendees.get(attendee_id)
        if attendee is None:
            return {"success": False, "error": f"Attendee {attendee_id} not found."}
        if attendee["status"] != "active":
            return {"success": False, "error": f"Attendee {attendee_id} is {attendee['status']}."}
        tier = self.tiers.get(tier_id)
        if tier is None:
            return {"success": False, "error": f"Tier {tier_id} not found."}
        event = self.events.get(tier["event_id"])
        if event is None or event["status"] != "on_sale":
            return {"success": False, "error": f"Tickets for {tier['event_id']} are not on sale."}
        if tier["status"] != "on_sale":
            return {"success": False, "error": f"Tier {tier_id} ({tier['name']}) is closed."}
        now = datetime.now()
        try:
            start = datetime.fromisoformat(event["starts_at"]).replace(tzinfo=None)
        except (TypeError, ValueError):
            return {"success": False, "error": f"Event {event['event_id']} has an invalid start."}
        if start <= now:
            return {"success": False, "error": f"Event {event['event_id']} has already started."}
        held = 0
        attendee_holds = 0
        for order in self.orders.values():
            if order["status"] != "held" or not order["expires_at"]:
                continue
            try:
                active = datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) > now
            except ValueError:
                continue
            if not active:
                continue
            if order["tier_id"] == tier_id:
                held += order["quantity"]
            if order["attendee_id"] == attendee_id and order["event_id"] == event["event_id"]:
                attendee_holds += order["quantity"]
        available = tier["capacity"] - tier["sold"] - held
        if quantity > available:
            return {"success": False, "error": f"Only {max(available, 0)} tickets of {tier['name']} are available."}
        owned = sum(1 for t in self.tickets.values()
                    if t["holder_id"] == attendee_id and t["event_id"] == event["event_id"] and t["status"] == "valid")
        limit = event["max_tickets_per_attendee"]
        if owned + attendee_holds + quantity > limit:
            return {"success": False, "error": f"Attendee {attendee_id} already has {owned} tickets and {attendee_holds} held for this event; the limit is {limit}."}
        number = len(self.orders) + 1
        while f"ORD-{number:04d}" in self.orders:
            number += 1
        order_id = f"ORD-{number:04d}"
        expires = (now + timedelta(minutes=self.HOLD_MINUTES)).isoformat(timespec="seconds")
        self.orders[order_id] = {
            "order_id": order_id, "attendee_id": attendee_id, "event_id": event["event_id"],
            "tier_id": tier_id, "quantity": quantity, "unit_price": tier["price"], "status": "held",
            "created_at": now.isoformat(timespec="seconds"), "expires_at": expires,
            "payment_reference": None, "ticket_ids": [], "refunded_amount": 0.0}
        total = round(tier["price"] * quantity, 2)
        return {"success": True, "message": f"{quantity} x {tier['name']} held as {order_id} until {expires}.",
                "data": {"order_id": order_id, "expires_at": expires, "total": total}}

    def confirm_order(self, order_id: str, payment_reference: str) -> dict:
        """Pay for a held order before its hold expires: its tickets are issued to the buyer with
        ids <order_id>-1, <order_id>-2, ...

        Args:
            order_id (str): The held order.
            payment_reference (str): The payment's reference, e.g. "PAY-88121".

        Returns:
            dict: {"success": True, "message": str, "data": {"ticket_ids": [str]}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not isinstance(payment_reference, str):
            return {"success": False, "error": "order_id and payment_reference must be strings."}
        if not payment_reference.strip():
            return {"success": False, "error": "payment_reference must not be empty."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order["status"] != "held":
            return {"success": False, "error": f"Order {order_id} is {order['status']}, not held."}
        try:
            expired = not order["expires_at"] or datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) <= datetime.now()
        except ValueError:
            expired = True
        if expired:
            return {"success": False, "error": f"The hold of order {order_id} expired at {order['expires_at']}; place a new hold."}
        tier = self.tiers.get(order["tier_id"])
        if tier is None:
            return {"success": False, "error": f"Tier {order['tier_id']} no longer exists."}
        ticket_ids = []
        for number in range(1, order["quantity"] + 1):
            ticket_id = f"{order_id}-{number}"
            self.tickets[ticket_id] = {"ticket_id": ticket_id, "order_id": order_id,
                                       "event_id": order["event_id"], "tier_id": order["tier_id"],
                                       "holder_id": order["attendee_id"], "status": "valid",
                                       "transfer_count": 0}
            ticket_ids.append(ticket_id)
        tier["sold"] += order["quantity"]
        order["status"] = "confirmed"
        order["payment_reference"] = payment_reference.strip()
        order["ticket_ids"] = ticket_ids
        return {"success": True, "message": f"Order {order_id} confirmed; {len(ticket_ids)} tickets issued.",
                "data": {"ticket_ids": list(ticket_ids)}}

    def release_hold(self, order_id: str) -> dict:
        """Give up a held order (active or expired) so its tickets return to sale.

        Args:
            order_id (str): The held order.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not order_id.strip():
            return {"success": False, "error": "order_id must be a non-empty string."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order["status"] != "held":
            return {"success": False, "error": f"Order {order_id} is {order['status']}, not held."}
        order["status"] = "released"
        return {"success": True, "message": f"Hold {order_id} released."}

    def refund_ticket(self, ticket_id: str) -> dict:
        """Refund one valid ticket to its buyer before the event's refund cutoff; the ticket is
        voided and its seat returns to sale.

        Args:
            ticket_id (str): The ticket, still held by its buyer.

        Returns:
            dict: {"success": True, "message": str, "data": {"refund_amount": float}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not ticket_id.strip():
            return {"success": False, "error": "ticket_id must be a non-empty string."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        if ticket["status"] != "valid":
            return {"success": False, "error": f"Ticket {ticket_id} is {ticket['status']}."}
        order = self.orders.get(ticket["order_id"])
        event = self.events.get(ticket["event_id"])
        tier = self.tiers.get(ticket["tier_id"])
        if order is None or event is None or tier is None:
            return {"success": False, "error": f"Ticket {ticket_id} refers to a missing order, event or tier."}
        if ticket["holder_id"] != order["attendee_id"]:
            return {"success": False, "error": "The ticket was transferred away from its buyer and cannot be refunded."}
        if event["status"] == "cancelled":
            return {"success": False, "error": f"Event {event['event_id']} is cancelled; its tickets were already refunded."}
        try:
            start = datetime.fromisoformat(event["starts_at"]).replace(tzinfo=None)
        except (TypeError, ValueError):
            return {"success": False, "error": f"Event {event['event_id']} has an invalid start."}
        cutoff = start - timedelta(hours=event["refund_cutoff_hours"])
        if datetime.now() >= cutoff:
            return {"success": False, "error": f"Refunds for {event['name']} closed at {cutoff.isoformat()}."}
        ticket["status"] = "refunded"
        tier["sold"] = max(tier["sold"] - 1, 0)
        order["refunded_amount"] = round(order["refunded_amount"] + order["unit_price"], 2)
        remaining = [t for t in order["ticket_ids"] if t in self.tickets and self.tickets[t]["status"] == "valid"]
        order["status"] = "partially_refunded" if remaining else "refunded"
        return {"success": True, "message": f"Ticket {ticket_id} refunded ({order['unit_price']:.2f}).",
                "data": {"refund_amount": order["unit_price"]}}

    def transfer_ticket(self, ticket_id: str, to_attendee_id: str) -> dict:
        """Transfer a valid ticket to another active attendee before the event starts (at most
        twice per ticket, within the recipient's ticket limit for the event).

        Args:
            ticket_id (str): The ticket.
            to_attendee_id (str): The recipient attendee.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not isinstance(to_attendee_id, str):
            return {"success": False, "error": "ticket_id and to_attendee_id must be strings."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        if ticket["status"] != "valid":
            return {"success": False, "error": f"Ticket {ticket_id} is {ticket['status']}."}
        recipient = self.attendees.get(to_attendee_id)
        if recipient is None:
            return {"success": False, "error": f"Attendee {to_attendee_id} not found."}
        if recipient["status"] != "active":
            return {"success": False, "error": f"Attendee {to_attendee_id} is {recipient['status']} and cannot receive tickets."}
        if to_attendee_id == ticket["holder_id"]:
            return {"success": False, "error": f"Attendee {to_attendee_id} already holds this ticket."}
        if ticket["transfer_count"] >= self.MAX_TRANSFERS_PER_TICKET:
            return {"success": False, "error": f"Ticket {ticket_id} has already been transferred {ticket['transfer_count']} times."}
        event = self.events.get(ticket["event_id"])
        if event is None or event["status"] == "cancelled":
            return {"success": False, "error": "The event is cancelled."}
        now = datetime.now()
        try:
            start = datetime.fromisoformat(event["starts_at"]).replace(tzinfo=None)
        except (TypeError, ValueError):
            return {"success": False, "error": f"Event {event['event_id']} has an invalid start."}
        if start <= now:
            return {"success": False, "error": f"Event {event['event_id']} has started; tickets can no longer be transferred."}
        owned = sum(1 for t in self.tickets.values()
                    if t["holder_id"] == to_attendee_id and t["event_id"] == event["event_id"] and t["status"] == "valid")
        holds = 0
        for order in self.orders.values():
            if order["attendee_id"] == to_attendee_id and order["event_id"] == event["event_id"] \
                    and order["status"] == "held" and order["expires_at"]:
                try:
                    if datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) > now:
                        holds += order["quantity"]
                except ValueError:
                    continue
        if owned + holds + 1 > event["max_tickets_per_attendee"]:
            return {"success": False, "error": f"Attendee {to_attendee_id} already has {owned + holds} tickets for this event; the limit is {event['max_tickets_per_attendee']}."}
        previous = ticket["holder_id"]
        ticket["holder_id"] = to_attendee_id
        ticket["transfer_count"] += 1
        return {"success": True, "message": f"Ticket {ticket_id} transferred from {previous} to {to_attendee_id}."}

    def update_tier(self, tier_id: str, price: Optional[float] = None,
                    capacity: Optional[int] = None, status: Optional[str] = None) -> dict:
        """Change a tier's price (for new holds only), capacity and/or sales status.

        Args:
            tier_id (str): The tier.
            price (Optional[float]): New price, above 0.
            capacity (Optional[int]): New capacity, at least sold plus held tickets; the event's
                tiers together must fit the venue.
            status (Optional[str]): "on_sale" or "closed".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(tier_id, str) or not tier_id.strip():
            return {"success": False, "error": "tier_id must be a non-empty string."}
        if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float))):
            return {"success": False, "error": "price must be a number or null."}
        if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int)):
            return {"success": False, "error": "capacity must be an integer or null."}
        if status is not None and (not isinstance(status, str) or status not in ("on_sale", "closed")):
            return {"success": False, "error": "status must be 'on_sale', 'closed' or null."}
        if price is None and capacity is None and status is None:
            return {"success": False, "error": "Give a price, a capacity and/or a status."}
        tier = self.tiers.get(tier_id)
        if tier is None:
            return {"success": False, "error": f"Tier {tier_id} not found."}
        event = self.events.get(tier["event_id"])
        if event is None or event["status"] in ("cancelled", "completed"):
            return {"success": False, "error": f"The event of tier {tier_id} is cancelled or completed."}
        if price is not None and price <= 0:
            return {"success": False, "error": "price must be above 0."}
        if capacity is not None:
            now = datetime.now()
            held = 0
            for order in self.orders.values():
                if order["tier_id"] == tier_id and order["status"] == "held" and order["expires_at"]:
                    try:
                        if datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) > now:
                            held += order["quantity"]
                    except ValueError:
                        continue
            if capacity < tier["sold"] + held:
                return {"success": False, "error": f"capacity cannot be below the {tier['sold']} sold and {held} held tickets."}
            venue = self.venues.get(event["venue_id"])
            others = sum(t["capacity"] for t in self.tiers.values()
                         if t["event_id"] == tier["event_id"] and t["tier_id"] != tier_id)
            if venue is not None and others + capacity > venue["capacity"]:
                return {"success": False, "error": f"The tiers would hold {others + capacity} people; {venue['name']} holds {venue['capacity']}."}
        if price is not None:
            tier["price"] = round(float(price), 2)
        if capacity is not None:
            tier["capacity"] = capacity
        if status is not None:
            tier["status"] = status
        return {"success": True, "message": f"Tier {tier_id} updated."}

    def cancel_event(self, event_id: str) -> dict:
        """Cancel an event: every valid ticket is refunded to its order, holds are released and
        the tiers close.

        Args:
            event_id (str): An event that is not cancelled or completed.

        Returns:
            dict: {"success": True, "message": str, "data": {"tickets_refunded": int,
            "holds_released": int}}, or {"success": False, "error": str}.
        """
        if not isinstance(event_id, str) or not event_id.strip():
            return {"success": False, "error": "event_id must be a non-empty string."}
        event = self.events.get(event_id)
        if event is None:
            return {"success": False, "error": f"Event {event_id} not found."}
        if event["status"] in ("cancelled", "completed"):
            return {"success": False, "error": f"Event {event_id} is already {event['status']}."}
        refunded = 0
        for ticket in self.tickets.values():
            if ticket["event_id"] != event_id or ticket["status"] != "valid":
                continue
            ticket["status"] = "refunded"
            refunded += 1
            tier = self.tiers.get(ticket["tier_id"])
            if tier is not None:
                tier["sold"] = max(tier["sold"] - 1, 0)
            order = self.orders.get(ticket["order_id"])
            if order is not None:
                order["refunded_amount"] = round(order["refunded_amount"] + order["unit_price"], 2)
        released = 0
        for order in self.orders.values():
            if order["event_id"] != event_id:
                continue
            if order["status"] == "held":
                order["status"] = "released"
                released += 1
            elif order["status"] in ("confirmed", "partially_refunded"):
                order["status"] = "refunded"
        for tier in self.tiers.values():
            if tier["event_id"] == event_id:
                tier["status"] = "closed"
        event["status"] = "cancelled"
        return {"success": True, "message": f"Event {event_id} cancelled.",
                "data": {"tickets_refunded": refunded, "holds_released": released}}

    def release_expired_holds(self, event_id: str) -> dict:
        """Mark every held order of an event whose hold time has run out as expired, so its
        tickets clearly return to sale.

        Args:
            event_id (str): The event.

        Returns:
            dict: {"success": True, "message": str, "data": {"expired_order_ids": [str]}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(event_id, str) or not event_id.strip():
            return {"success": False, "error": "event_id must be a non-empty string."}
        if event_id not in self.events:
            return {"success": False, "error": f"Event {event_id} not found."}
        now = datetime.now()
        expired = []
        for order_id in sorted(self.orders):
            order = self.orders[order_id]
            if order["event_id"] != event_id or order["status"] != "held":
                continue
            try:
                ended = not order["expires_at"] or datetime.fromisoformat(order["expires_at"]).replace(tzinfo=None) <= now
            except ValueError:
                ended = True
            if ended:
                order["status"] = "expired"
                expired.append(order_id)
        return {"success": True, "message": f"{len(expired)} expired holds of {event_id} closed.",
                "data": {"expired_order_ids": expired}}
