from datetime import date, datetime, timedelta
from typing import Dict, List, Literal, Optional, TypedDict


class LocationInfo(TypedDict):
    location_id: str
    name: str
    location_type: str  # "ward" | "icu" | "theatre" | "emergency" | "storage" | "biomed_workshop"
    building: str
    floor: int
    capacity: int  # most non-retired assets that may be at the location at once
    status: str  # "open" | "closed"


class AssetInfo(TypedDict):
    asset_id: str
    name: str
    category: str  # e.g. "infusion_pump", "patient_monitor", "ventilator", "defibrillator"
    manufacturer: str
    model: str
    serial_number: str  # unique
    home_location_id: str  # the storage or workshop location the asset returns to
    current_location_id: str
    status: str  # "available" | "in_use" | "maintenance" | "retired"
    purchase_date: str  # ISO date
    calibration_interval_days: int
    last_calibrated: str  # ISO date
    next_calibration_due: str  # ISO date
    retired_date: Optional[str]  # ISO date, None unless retired
    retirement_reason: Optional[str]


class TechnicianInfo(TypedDict):
    technician_id: str
    name: str
    certifications: List[str]  # asset categories the technician may service
    status: str  # "active" | "inactive"


class TicketInfo(TypedDict):
    ticket_id: str
    asset_id: str
    ticket_type: str  # "repair" | "preventive" | "calibration"
    priority: str  # "low" | "medium" | "high" | "critical"
    description: str
    status: str  # "open" | "in_progress" | "resolved" | "cancelled"
    reported_by: str
    technician_id: Optional[str]
    opened_at: str  # ISO date-time
    resolved_at: Optional[str]  # ISO date-time
    resolution_notes: Optional[str]


class CheckoutInfo(TypedDict):
    checkout_id: str
    asset_id: str
    location_id: str  # the clinical location the asset went to
    requested_by: str
    checked_out_at: str  # ISO date-time
    due_back: str  # ISO date
    returned_at: Optional[str]  # ISO date-time, None while active
    status: str  # "active" | "returned"


class HospitalAssetManagement:
    CLINICAL_TYPES = ("ward", "icu", "theatre", "emergency")
    HOME_TYPES = ("storage", "biomed_workshop")
    MAX_CHECKOUT_DAYS = 30
    MAX_TICKETS_IN_PROGRESS = 3
    MIN_CALIBRATION_INTERVAL = 30
    MAX_CALIBRATION_INTERVAL = 730

    def __init__(self, init_config: dict):
        # Wards, theatres, stores and workshops, by location_id.
        self.locations: Dict[str, LocationInfo] = {}
        # Medical equipment, by asset_id.
        self.assets: Dict[str, AssetInfo] = {}
        # Biomedical engineering technicians, by technician_id.
        self.technicians: Dict[str, TechnicianInfo] = {}
        # Maintenance tickets, by ticket_id.
        self.tickets: Dict[str, TicketInfo] = {}
        # Check-outs of equipment to clinical locations, by checkout_id.
        self.checkouts: Dict[str, CheckoutInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - An asset is checked out only when it is available, its calibration is not overdue
        #   (next_calibration_due on or after today) and it has no unresolved high or critical
        #   ticket; only to an open clinical location (ward, icu, theatre, emergency) below its
        #   capacity; due back after today and within 30 days.
        # - A location holds at most `capacity` non-retired assets (current_location_id).
        # - An asset has at most one active check-out; returning it moves it to its home
        #   location and makes it available, or "maintenance" when an unresolved high or
        #   critical ticket exists.
        # - An asset has at most one unresolved (open or in_progress) ticket, and retired assets
        #   get none; a high or critical ticket takes an available asset out of service
        #   ("maintenance") at once.
        # - Assigning a ticket needs an active technician certified for the asset's category with
        #   fewer than 3 tickets in progress, and the asset must not be in use; the ticket goes
        #   in_progress and the asset to "maintenance".
        # - Resolving an in-progress ticket makes the asset available again; a calibration ticket
        #   also records a calibration (last_calibrated today, next due after the interval).
        # - Only open tickets can be cancelled, with a reason.
        # - A calibration is recorded by an active certified technician on an asset that is not in
        #   use or retired.
        # - An asset can be retired only when it is not in use and has no unresolved ticket;
        #   retired assets cannot be checked out, ticketed or calibrated.
        # - New assets get a unique serial number, a home location that is an open storage or
        #   workshop with room, and a calibration interval of 30 to 730 days.

    def get_asset(self, asset_id: str) -> dict:
        """Get an asset's record by asset id, with whether its calibration is overdue.

        Args:
            asset_id (str): The asset id, e.g. "EQ-1001".

        Returns:
            dict: {"success": True, "data": asset record plus "calibration_overdue"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(asset_id, str) or not asset_id.strip():
            return {"success": False, "error": "asset_id must be a non-empty string."}
        asset = self.assets.get(asset_id)
        if asset is None:
            return {"success": False, "error": f"Asset {asset_id} not found."}
        data = dict(asset)
        data["calibration_overdue"] = asset.get("status") != "retired" and \
            str(asset.get("next_calibration_due", "")) < datetime.now().date().isoformat()
        return {"success": True, "data": data}

    def search_assets(self, query: Optional[str] = None, category: Optional[str] = None,
                      status: Optional[str] = None, location_id: Optional[str] = None) -> dict:
        """Search assets by text (name, model or serial number), category, status and current
        location; every filter is optional.

        Args:
            query (Optional[str]): Text contained in the name, model or serial number
                (case-insensitive).
            category (Optional[str]): Asset category, e.g. "infusion_pump".
            status (Optional[str]): "available", "in_use", "maintenance" or "retired".
            location_id (Optional[str]): Only assets currently at this location.

        Returns:
            dict: {"success": True, "data": [asset records]} sorted by asset id, or
            {"success": False, "error": str}.
        """
        for label, value in (("query", query), ("category", category), ("status", status),
                             ("location_id", location_id)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        if status is not None and status not in ("available", "in_use", "maintenance", "retired"):
            return {"success": False, "error": "status must be available, in_use, maintenance or retired."}
        needle = query.strip().lower() if query is not None else None
        found = []
        for asset_id, asset in sorted(self.assets.items()):
            if needle and not any(needle in str(asset.get(field, "")).lower()
                                  for field in ("name", "model", "serial_number")):
                continue
            if category is not None and asset.get("category") != category.strip():
                continue
            if status is not None and asset.get("status") != status:
                continue
            if location_id is not None and asset.get("current_location_id") != location_id:
                continue
            found.append(dict(asset))
        return {"success": True, "data": found}

    def list_assets_at_location(self, location_id: str) -> dict:
        """List the non-retired assets currently at a location, with its capacity.

        Args:
            location_id (str): The location id, e.g. "LOC-ICU".

        Returns:
            dict: {"success": True, "data": {"location_id", "capacity", "count",
            "assets": [asset records]}}, or {"success": False, "error": str}.
        """
        if not isinstance(location_id, str) or not location_id.strip():
            return {"success": False, "error": "location_id must be a non-empty string."}
        location = self.locations.get(location_id)
        if location is None:
            return {"success": False, "error": f"Location {location_id} not found."}
        here = [dict(asset) for asset_id, asset in sorted(self.assets.items())
                if asset.get("current_location_id") == location_id and asset.get("status") != "retired"]
        return {"success": True, "data": {"location_id": location_id,
                                          "capacity": location.get("capacity", 0),
                                          "count": len(here), "assets": here}}

    def list_calibration_due(self, on_or_before: str) -> dict:
        """List non-retired assets whose calibration is due on or before a date, soonest first.

        Args:
            on_or_before (str): ISO date (YYYY-MM-DD).

        Returns:
            dict: {"success": True, "data": [{"asset_id", "name", "category", "status",
            "current_location_id", "next_calibration_due", "overdue"}]}, or
            {"success": False, "error": str}.
        """
        if not isinstance(on_or_before, str):
            return {"success": False, "error": "on_or_before must be an ISO date string."}
        try:
            limit = date.fromisoformat(on_or_before).isoformat()
        except ValueError:
            return {"success": False, "error": "on_or_before must be an ISO date (YYYY-MM-DD)."}
        today = datetime.now().date().isoformat()
        found = []
        for asset_id, asset in self.assets.items():
            due = str(asset.get("next_calibration_due", ""))
            if asset.get("status") == "retired" or due > limit:
                continue
            found.append({"asset_id": asset_id, "name": asset.get("name"),
                          "category": asset.get("category"), "status": asset.get("status"),
                          "current_location_id": asset.get("current_location_id"),
                          "next_calibration_due": due, "overdue": due < today})
        found.sort(key=lambda entry: (entry["next_calibration_due"], entry["asset_id"]))
        return {"success": True, "data": found}

    def get_location(self, location_id: str) -> dict:
        """Get a location with the number of assets currently there.

        Args:
            location_id (str): The location id.

        Returns:
            dict: {"success": True, "data": location record plus "asset_count"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(location_id, str) or not location_id.strip():
            return {"success": False, "error": "location_id must be a non-empty string."}
        location = self.locations.get(location_id)
        if location is None:
            return {"success": False, "error": f"Location {location_id} not found."}
        data = dict(location)
        data["asset_count"] = sum(1 for asset in self.assets.values()
                                  if asset.get("current_location_id") == location_id
                                  and asset.get("status") != "retired")
        return {"success": True, "data": data}

    def list_locations(self, location_type: Optional[str] = None, status: Optional[str] = None) -> dict:
        """List locations, optionally filtered by type and status.

        Args:
            location_type (Optional[str]): "ward", "icu", "theatre", "emergency", "storage" or
                "biomed_workshop"; None for all.
            status (Optional[str]): "open" or "closed"; None for all.

        Returns:
            dict: {"success": True, "data": [location records]} sorted by id, or
            {"success": False, "error": str}.
        """
        if location_type is not None and not isinstance(location_type, str):
            return {"success": False, "error": "location_type must be a string."}
        if status is not None and (not isinstance(status, str) or status not in ("open", "closed")):
            return {"success": False, "error": "status must be open or closed."}
        found = [dict(location) for location_id, location in sorted(self.locations.items())
                 if (location_type is None or location.get("location_type") == location_type)
                 and (status is None or location.get("status") == status)]
        return {"success": True, "data": found}

    def get_ticket(self, ticket_id: str) -> dict:
        """Get a maintenance ticket by id.

        Args:
            ticket_id (str): The ticket id, e.g. "TCK-0001".

        Returns:
            dict: {"success": True, "data": ticket record}, or {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not ticket_id.strip():
            return {"success": False, "error": "ticket_id must be a non-empty string."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        return {"success": True, "data": dict(ticket)}

    def list_tickets(self, asset_id: Optional[str] = None, status: Optional[str] = None,
                     technician_id: Optional[str] = None) -> dict:
        """List maintenance tickets filtered by asset, status and/or technician, oldest first.

        Args:
            asset_id (Optional[str]): Only this asset's tickets.
            status (Optional[str]): "open", "in_progress", "resolved" or "cancelled".
            technician_id (Optional[str]): Only tickets assigned to this technician.

        Returns:
            dict: {"success": True, "data": [ticket records]}, or {"success": False, "error": str}.
        """
        for label, value in (("asset_id", asset_id), ("status", status), ("technician_id", technician_id)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        if status is not None and status not in ("open", "in_progress", "resolved", "cancelled"):
            return {"success": False, "error": "status must be open, in_progress, resolved or cancelled."}
        found = [dict(ticket) for ticket in self.tickets.values()
                 if (asset_id is None or ticket.get("asset_id") == asset_id)
                 and (status is None or ticket.get("status") == status)
                 and (technician_id is None or ticket.get("technician_id") == technician_id)]
        found.sort(key=lambda ticket: (ticket.get("opened_at", ""), ticket.get("ticket_id", "")))
        return {"success": True, "data": found}

    def get_technician(self, technician_id: str) -> dict:
        """Get a technician with the number of tickets they have in progress.

        Args:
            technician_id (str): The technician id, e.g. "T-01".

        Returns:
            dict: {"success": True, "data": technician record plus "tickets_in_progress"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(technician_id, str) or not technician_id.strip():
            return {"success": False, "error": "technician_id must be a non-empty string."}
        technician = self.technicians.get(technician_id)
        if technician is None:
            return {"success": False, "error": f"Technician {technician_id} not found."}
        data = dict(technician)
        data["certifications"] = list(technician.get("certifications", []))
        data["tickets_in_progress"] = sum(1 for ticket in self.tickets.values()
                                          if ticket.get("technician_id") == technician_id
                                          and ticket.get("status") == "in_progress")
        return {"success": True, "data": data}

    def list_technicians(self, certification: Optional[str] = None, status: Optional[str] = None) -> dict:
        """List technicians, optionally those certified for a category and/or with a status.

        Args:
            certification (Optional[str]): An asset category, e.g. "ventilator".
            status (Optional[str]): "active" or "inactive"; None for all.

        Returns:
            dict: {"success": True, "data": [technician records with "tickets_in_progress"]}, or
            {"success": False, "error": str}.
        """
        if certification is not None and not isinstance(certification, str):
            return {"success": False, "error": "certification must be a string."}
        if status is not None and (not isinstance(status, str) or status not in ("active", "inactive")):
            return {"success": False, "error": "status must be active or inactive."}
        found = []
        for technician_id, technician in sorted(self.technicians.items()):
            if certification is not None and certification not in technician.get("certifications", []):
                continue
            if status is not None and technician.get("status") != status:
                continue
            data = dict(technician)
            data["certifications"] = list(technician.get("certifications", []))
            data["tickets_in_progress"] = sum(1 for ticket in self.tickets.values()
                                              if ticket.get("technician_id") == technician_id
                                              and ticket.get("status") == "in_progress")
            found.append(data)
        return {"success": True, "data": found}

    def list_checkouts(self, asset_id: Optional[str] = None, location_id: Optional[str] = None,
                       status: Optional[str] = None) -> dict:
        """List check-outs filtered by asset, location and/or status, most recent first.

        Args:
            asset_id (Optional[str]): Only check-outs of this asset.
            location_id (Optional[str]): Only check-outs to this location.
            status (Optional[str]): "active" or "returned".

        Returns:
            dict: {"success": True, "data": [check-out records]}, or {"success": False, "error": str}.
        """
        for label, value in (("asset_id", asset_id), ("location_id", location_id), ("status", status)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        if status is not None and status not in ("active", "returned"):
            return {"success": False, "error": "status must be active or returned."}
        found = [dict(checkout) for checkout in self.checkouts.values()
                 if (asset_id is None or checkout.get("asset_id") == asset_id)
                 and (location_id is None or checkout.get("location_id") == location_id)
                 and (status is None or checkout.get("status") == status)]
        found.sort(key=lambda checkout: (checkout.get("checked_out_at", ""), checkout.get("checkout_id", "")),
                   reverse=True)
        return {"success": True, "data": found}

    def register_asset(self, name: str, category: str, manufacturer: str, model: str,
                       serial_number: str, home_location_id: str, purchase_date: str,
                       calibration_interval_days: int, last_calibrated: str) -> dict:
        """Register a new asset at its home location (an open storage or workshop with room). It
        starts available; the next calibration is due one interval after last_calibrated. The new
        id is "AST-" followed by the next free four-digit number.

        Args:
            name (str): Descriptive name, e.g. "Infusion pump".
            category (str): Asset category, e.g. "infusion_pump".
            manufacturer (str): Manufacturer name.
            model (str): Model name.
            serial_number (str): Serial number, unique across assets.
            home_location_id (str): The storage or workshop location it belongs to.
            purchase_date (str): ISO date.
            calibration_interval_days (int): Days between calibrations, 30 to 730.
            last_calibrated (str): ISO date of the factory or acceptance calibration.

        Returns:
            dict: {"success": True, "message": str, "data": {"asset_id", "next_calibration_due"}},
            or {"success": False, "error": str}.
        """
        for label, value in (("name", name), ("category", category), ("manufacturer", manufacturer),
                             ("model", model), ("serial_number", serial_number),
                             ("home_location_id", home_location_id), ("purchase_date", purchase_date),
                             ("last_calibrated", last_calibrated)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        if isinstance(calibration_interval_days, bool) or not isinstance(calibration_interval_days, int):
            return {"success": False, "error": "calibration_interval_days must be an integer."}
        if not self.MIN_CALIBRATION_INTERVAL <= calibration_interval_days <= self.MAX_CALIBRATION_INTERVAL:
            return {"success": False, "error": "calibration_interval_days must be between 30 and 730."}
        try:
            bought = date.fromisoformat(purchase_date)
            calibrated = date.fromisoformat(last_calibrated)
        except ValueError:
            return {"success": False, "error": "purchase_date and last_calibrated must be ISO dates (YYYY-MM-DD)."}
        if calibrated > datetime.now().date():
            return {"success": False, "error": "last_calibrated cannot be in the future."}
        serial = serial_number.strip()
        if any(str(asset.get("serial_number", "")).lower() == serial.lower() for asset in self.assets.values()):
            return {"success": False, "error": f"Serial number {serial} is already registered."}
        location = self.locations.get(home_location_id)
        if location is None:
            return {"success": False, "error": f"Location {home_location_id} not found."}
        if location.get("location_type") not in self.HOME_TYPES or location.get("status") != "open":
            return {"success": False, "error": f"{home_location_id} is not an open storage or workshop location."}
        count = sum(1 for asset in self.assets.values()
                    if asset.get("current_location_id") == home_location_id and asset.get("status") != "retired")
        if count >= location.get("capacity", 0):
            return {"success": False, "error": f"{home_location_id} is full ({count} of {location.get('capacity', 0)})."}
        number = len(self.assets) + 1
        while f"AST-{number:04d}" in self.assets:
            number += 1
        asset_id = f"AST-{number:04d}"
        due = (calibrated + timedelta(days=calibration_interval_days)).isoformat()
        self.assets[asset_id] = {
            "asset_id": asset_id, "name": name.strip(), "category": category.strip(),
            "manufacturer": manufacturer.strip(), "model": model.strip(), "serial_number": serial,
            "home_location_id": home_location_id, "current_location_id": home_location_id,
            "status": "available", "purchase_date": bought.isoformat(),
            "calibration_interval_days": calibration_interval_days,
            "last_calibrated": calibrated.isoformat(), "next_calibration_due": due,
            "retired_date": None, "retirement_reason": None}
        return {"success": True, "message": f"Asset {asset_id} registered at {home_location_id}.",
                "data": {"asset_id": asset_id, "next_calibration_due": due}}

    def checkout_asset(self, asset_id: str, location_id: str, requested_by: str, due_back: str) -> dict:
        """Check an available, calibrated asset out to an open clinical location (ward, icu,
        theatre or emergency) with room. The new id is "CO-" followed by the next free four-digit
        number.

        Args:
            asset_id (str): The asset id.
            location_id (str): The clinical location receiving it.
            requested_by (str): Who asked for it, e.g. "Sr. Mary Okoye".
            due_back (str): ISO date it must be returned by: after today, within 30 days.

        Returns:
            dict: {"success": True, "message": str, "data": {"checkout_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("asset_id", asset_id), ("location_id", location_id),
                             ("requested_by", requested_by), ("due_back", due_back)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        try:
            due = date.fromisoformat(due_back)
        except ValueError:
            return {"success": False, "error": "due_back must be an ISO date (YYYY-MM-DD)."}
        asset = self.assets.get(asset_id)
        if asset is None:
            return {"success": False, "error": f"Asset {asset_id} not found."}
        if asset.get("status") != "available":
            return {"success": False, "error": f"Asset {asset_id} is {asset.get('status')}, not available."}
        today = datetime.now().date()
        if str(asset.get("next_calibration_due", "")) < today.isoformat():
            return {"success": False, "error": f"Asset {asset_id} is overdue for calibration "
                    f"(due {asset.get('next_calibration_due')})."}
        blocking = [ticket["ticket_id"] for ticket in self.tickets.values()
                    if ticket.get("asset_id") == asset_id and ticket.get("status") in ("open", "in_progress")
                    and ticket.get("priority") in ("high", "critical")]
        if blocking:
            return {"success": False, "error": f"Asset {asset_id} has an unresolved {', '.join(blocking)}."}
        location = self.locations.get(location_id)
        if location is None:
            return {"success": False, "error": f"Location {location_id} not found."}
        if location.get("location_type") not in self.CLINICAL_TYPES:
            return {"success": False, "error": f"{location_id} is not a clinical location."}
        if location.get("status") != "open":
            return {"success": False, "error": f"{location_id} is closed."}
        count = sum(1 for other in self.assets.values()
                    if other.get("current_location_id") == location_id and other.get("status") != "retired")
        if count >= location.get("capacity", 0):
            return {"success": False, "error": f"{location_id} is at capacity ({count} of {location.get('capacity', 0)})."}
        if due <= today or due > today + timedelta(days=self.MAX_CHECKOUT_DAYS):
            return {"success": False, "error": "due_back must be after today and within 30 days."}
        if any(checkout.get("asset_id") == asset_id and checkout.get("status") == "active"
               for checkout in self.checkouts.values()):
            return {"success": False, "error": f"Asset {asset_id} already has an active check-out."}
        number = len(self.checkouts) + 1
        while f"CO-{number:04d}" in self.checkouts:
            number += 1
        checkout_id = f"CO-{number:04d}"
        self.checkouts[checkout_id] = {
            "checkout_id": checkout_id, "asset_id": asset_id, "location_id": location_id,
            "requested_by": requested_by.strip(),
            "checked_out_at": datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "due_back": due.isoformat(), "returned_at": None, "status": "active"}
        asset["status"] = "in_use"
        asset["current_location_id"] = location_id
        return {"success": True, "message": f"{asset_id} checked out to {location_id} until {due.isoformat()}.",
                "data": {"checkout_id": checkout_id}}

    def return_asset(self, asset_id: str) -> dict:
        """Return a checked-out asset to its home location. It becomes available, or
        "maintenance" when it has an unresolved high or critical ticket.

        Args:
            asset_id (str): The asset id.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(asset_id, str) or not asset_id.strip():
            return {"success": False, "error": "asset_id must be a non-empty string."}
        asset = self.assets.get(asset_id)
        if asset is None:
            return {"success": False, "error": f"Asset {asset_id} not found."}
        active = [checkout for checkout in self.checkouts.values()
                  if checkout.get("asset_id") == asset_id and checkout.get("status") == "active"]
        if not active:
            return {"success": False, "error": f"Asset {asset_id} is not checked out."}
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        for checkout in active:
            checkout["status"] = "returned"
            checkout["returned_at"] = stamp
        blocking = any(ticket.get("asset_id") == asset_id and ticket.get("status") in ("open", "in_progress")
                       and ticket.get("priority") in ("high", "critical") for ticket in self.tickets.values())
        asset["current_location_id"] = asset.get("home_location_id")
        asset["status"] = "maintenance" if blocking else "available"
        return {"success": True, "message": f"{asset_id} returned to {asset.get('home_location_id')} "
                f"and is now {asset['status']}."}

    def open_ticket(self, asset_id: str, ticket_type: Literal["repair", "preventive", "calibration"],
                    priority: Literal["low", "medium", "high", "critical"], description: str,
                    reported_by: str) -> dict:
        """Open a maintenance ticket for a non-retired asset that has no other unresolved ticket. A
        high or critical ticket takes an available asset out of service at once. The new id is
        "TCK-" followed by the next free four-digit number.

        Args:
            asset_id (str): The asset id.
            ticket_type (str): "repair", "preventive" or "calibration".
            priority (str): "low", "medium", "high" or "critical".
            description (str): What is wrong or what is needed.
            reported_by (str): Who reported it.

        Returns:
            dict: {"success": True, "message": str, "data": {"ticket_id": str}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(asset_id, str) or not asset_id.strip():
            return {"success": False, "error": "asset_id must be a non-empty string."}
        if not isinstance(ticket_type, str) or ticket_type not in ("repair", "preventive", "calibration"):
            return {"success": False, "error": "ticket_type must be repair, preventive or calibration."}
        if not isinstance(priority, str) or priority not in ("low", "medium", "high", "critical"):
            return {"success": False, "error": "priority must be low, medium, high or critical."}
        if not isinstance(description, str) or not description.strip():
            return {"success": False, "error": "description must be a non-empty string."}
        if not isinstance(reported_by, str) or not reported_by.strip():
            return {"success": False, "error": "reported_by must be a non-empty string."}
        asset = self.assets.get(asset_id)
        if asset is None:
            return {"success": False, "error": f"Asset {asset_id} not found."}
        if asset.get("status") == "retired":
            return {"success": False, "error": f"Asset {asset_id} is retired."}
        unresolved = [ticket["ticket_id"] for ticket in self.tickets.values()
                      if ticket.get("asset_id") == asset_id and ticket.get("status") in ("open", "in_progress")]
        if unresolved:
            return {"success": False, "error": f"Asset {asset_id} already has the unresolved ticket {unresolved[0]}."}
        number = len(self.tickets) + 1
        while f"TCK-{number:04d}" in self.tickets:
            number += 1
        ticket_id = f"TCK-{number:04d}"
        self.tickets[ticket_id] = {
            "ticket_id": ticket_id, "asset_id": asset_id, "ticket_type": ticket_type,
            "priority": priority, "description": description.strip(), "status": "open",
            "reported_by": reported_by.strip(), "technician_id": None,
            "opened_at": datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ"), "resolved_at": None,
            "resolution_notes": None}
        note = ""
        if priority in ("high", "critical") and asset.get("status") == "available":
            asset["status"] = "maintenance"
            note = f"; {asset_id} is out of service"
        return {"success": True, "message": f"Ticket {ticket_id} opened for {asset_id}{note}.",
                "data": {"ticket_id": ticket_id}}

    def assign_ticket(self, ticket_id: str, technician_id: str) -> dict:
        """Assign an open ticket to an active technician certified for the asset's category who has
        fewer than 3 tickets in progress. The asset must not be in use; the ticket goes in_progress
        and the asset to "maintenance".

        Args:
            ticket_id (str): The open ticket's id.
            technician_id (str): The technician id.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not ticket_id.strip():
            return {"success": False, "error": "ticket_id must be a non-empty string."}
        if not isinstance(technician_id, str) or not technician_id.strip():
            return {"success": False, "error": "technician_id must be a non-empty string."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        if ticket.get("status") != "open":
            return {"success": False, "error": f"Ticket {ticket_id} is {ticket.get('status')}, not open."}
        asset = self.assets.get(ticket.get("asset_id"))
        if asset is None:
            return {"success": False, "error": f"Asset {ticket.get('asset_id')} not found."}
        if asset.get("status") == "in_use":
            return {"success": False, "error": f"Asset {asset['asset_id']} is in use; return it first."}
        technician = self.technicians.get(technician_id)
        if technician is None:
            return {"success": False, "error": f"Technician {technician_id} not found."}
        if technician.get("status") != "active":
            return {"success": False, "error": f"Technician {technician_id} is inactive."}
        if asset.get("category") not in technician.get("certifications", []):
            return {"success": False, "error": f"Technician {technician_id} is not certified for {asset.get('category')}."}
        load = sum(1 for other in self.tickets.values()
                   if other.get("technician_id") == technician_id and other.get("status") == "in_progress")
        if load >= self.MAX_TICKETS_IN_PROGRESS:
            return {"success": False, "error": f"Technician {technician_id} already has {load} tickets in progress."}
        ticket["technician_id"] = technician_id
        ticket["status"] = "in_progress"
        asset["status"] = "maintenance"
        return {"success": True, "message": f"Ticket {ticket_id} assigned to {technician_id}; "
                f"{asset['asset_id']} is in maintenance."}

    def resolve_ticket(self, ticket_id: str, resolution_notes: str) -> dict:
        """Resolve an in-progress ticket. The asset becomes available again; for a calibration
        ticket the calibration is recorded (last_calibrated today, next due after the interval).

        Args:
            ticket_id (str): The in-progress ticket's id.
            resolution_notes (str): What was done.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not ticket_id.strip():
            return {"success": False, "error": "ticket_id must be a non-empty string."}
        if not isinstance(resolution_notes, str) or not resolution_notes.strip():
            return {"success": False, "error": "resolution_notes must be a non-empty string."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        if ticket.get("status") != "in_progress":
            return {"success": False, "error": f"Ticket {ticket_id} is {ticket.get('status')}, not in progress."}
        asset = self.assets.get(ticket.get("asset_id"))
        today = datetime.now().date()
        ticket["status"] = "resolved"
        ticket["resolved_at"] = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        ticket["resolution_notes"] = resolution_notes.strip()
        extra = ""
        if asset is not None and asset.get("status") != "retired":
            asset["status"] = "available"
            if ticket.get("ticket_type") == "calibration":
                asset["last_calibrated"] = today.isoformat()
                asset["next_calibration_due"] = (
                    today + timedelta(days=int(asset.get("calibration_interval_days", 365)))).isoformat()
                extra = f"; calibrated, next due {asset['next_calibration_due']}"
        return {"success": True, "message": f"Ticket {ticket_id} resolved{extra}."}

    def cancel_ticket(self, ticket_id: str, reason: str) -> dict:
        """Cancel an open (not yet assigned) ticket with a reason. An asset taken out of service by
        the ticket becomes available again.

        Args:
            ticket_id (str): The open ticket's id.
            reason (str): Why the ticket is cancelled.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(ticket_id, str) or not ticket_id.strip():
            return {"success": False, "error": "ticket_id must be a non-empty string."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            return {"success": False, "error": f"Ticket {ticket_id} not found."}
        if ticket.get("status") != "open":
            return {"success": False, "error": f"Ticket {ticket_id} is {ticket.get('status')}; only open tickets can be cancelled."}
        ticket["status"] = "cancelled"
        ticket["resolved_at"] = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        ticket["resolution_notes"] = f"Cancelled: {reason.strip()}"
        asset = self.assets.get(ticket.get("asset_id"))
        if asset is not None and asset.get("status") == "maintenance":
            asset["status"] = "available"
        return {"success": True, "message": f"Ticket {ticket_id} cancelled."}

    def record_calibration(self, asset_id: str, technician_id: str) -> dict:
        """Record that a certified technician calibrated an asset today: last_calibrated becomes
        today and the next calibration is due one interval later. The asset must not be in use or
        retired.

        Args:
            asset_id (str): The asset id.
            technician_id (str): The active technician certified for the asset's category.

        Returns:
            dict: {"success": True, "message": str, "data": {"next_calibration_due": str}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(asset_id, str) or not asset_id.strip():
            return {"success": False, "error": "asset_id must be a non-empty string."}
        if not isinstance(technician_id, str) or not technician_id.strip():
            return {"success": False, "error": "technician_id must be a non-empty string."}
        asset = self.assets.get(asset_id)
        if asset is None:
            return {"success": False, "error": f"Asset {asset_id} not found."}
        if asset.get("status") in ("in_use", "retired"):
            return {"success": False, "error": f"Asset {asset_id} is {asset.get('status')} and cannot be calibrated."}
        technician = self.technicians.get(technician_id)
        if technician is None:
            return {"success": False, "error": f"Technician {technician_id} not found."}
        if technician.get("status") != "active":
            return {"success": False, "error": f"Technician {technician_id} is inactive."}
        if asset.get("category") not in technician.get("certifications", []):
            return {"success": False, "error": f"Technician {technician_id} is not certified for {asset.get('category')}."}
        today = datetime.now().date()
        asset["last_calibrated"] = today.isoformat()
        asset["next_calibration_due"] = (
            today + timedelta(days=int(asset.get("calibration_interval_days", 365)))).isoformat()
        return {"success": True, "message": f"{asset_id} calibrated by {technician_id}; next due "
                f"{asset['next_calibration_due']}.", "data": {"next_calibration_due": asset["next_calibration_due"]}}

    def retire_asset(self, asset_id: str, reason: str) -> dict:
        """Retire an asset that is not in use and has no unresolved ticket.

        Args:
            asset_id (str): The asset id.
            reason (str): Why it is retired, e.g. "Beyond economical repair".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(asset_id, str) or not asset_id.strip():
            return {"success": False, "error": "asset_id must be a non-empty string."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        asset = self.assets.get(asset_id)
        if asset is None:
            return {"success": False, "error": f"Asset {asset_id} not found."}
        if asset.get("status") == "retired":
            return {"success": False, "error": f"Asset {asset_id} is already retired."}
        if asset.get("status") == "in_use":
            return {"success": False, "error": f"Asset {asset_id} is in use; return it first."}
        unresolved = [ticket["ticket_id"] for ticket in self.tickets.values()
                      if ticket.get("asset_id") == asset_id and ticket.get("status") in ("open", "in_progress")]
        if unresolved:
            return {"success": False, "error": f"Asset {asset_id} has the unresolved ticket {unresolved[0]}; "
                    "resolve or cancel it first."}
        asset["status"] = "retired"
        asset["retired_date"] = datetime.now().date().isoformat()
        asset["retirement_reason"] = reason.strip()
        return {"success": True, "message": f"Asset {asset_id} retired: {reason.strip()}."}
