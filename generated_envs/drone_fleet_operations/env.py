from datetime import date, datetime, timedelta, timezone
from typing import Dict, List, Optional, TypedDict


class DroneInfo(TypedDict):
    drone_id: str
    model: str
    serial_number: str
    home_base: str
    status: str  # "available" | "on_mission" | "grounded" | "retired"
    flight_hours: float
    hours_since_inspection: float
    max_payload_kg: float
    battery_id: Optional[str]  # the installed battery, if any
    last_inspection_date: str  # ISO 8601 date


class BatteryInfo(TypedDict):
    battery_id: str
    model: str  # the drone model the battery fits
    charge_percent: int  # 0-100
    cycle_count: int
    max_cycles: int
    health: str  # "good" | "retired"
    installed_in: Optional[str]  # drone_id, if installed


class PilotInfo(TypedDict):
    pilot_id: str
    name: str
    certifications: List[str]  # e.g. "basic", "night", "controlled_airspace"
    license_expiry: str  # ISO 8601 date
    status: str  # "active" | "suspended"
    flight_hours: float


class ZoneInfo(TypedDict):
    zone_id: str
    name: str
    airspace_class: str  # "open" | "controlled" | "restricted" | "no_fly"
    required_certification: Optional[str]
    max_altitude_m: int


class MissionInfo(TypedDict):
    mission_id: str
    drone_id: str
    pilot_id: str
    zone_id: str
    purpose: str
    scheduled_start: str  # ISO 8601 date-time (UTC)
    duration_minutes: int
    altitude_m: int
    payload_kg: float
    status: str  # "planned" | "in_progress" | "completed" | "cancelled"
    battery_id: Optional[str]  # battery flown, set at launch
    flight_minutes: int  # actual flight time, set at completion
    notes: Optional[str]


class MaintenanceRecordInfo(TypedDict):
    record_id: str
    drone_id: str
    opened_date: str  # ISO 8601 date
    issue: str
    status: str  # "open" | "closed"
    closed_date: Optional[str]
    resolution: Optional[str]


class DroneFleetOperations:
    CERTIFICATIONS = ("basic", "night", "bvlos", "controlled_airspace", "restricted_ops",
                      "heavy_payload")
    DRONE_STATUSES = ("available", "on_mission", "grounded", "retired")
    MISSION_STATUSES = ("planned", "in_progress", "completed", "cancelled")
    AIRSPACE_CLASSES = ("open", "controlled", "restricted", "no_fly")
    REGULATORY_MAX_ALTITUDE_M = 120
    MIN_LAUNCH_CHARGE = 80
    HEAVY_PAYLOAD_KG = 5.0
    INSPECTION_INTERVAL_HOURS = 50.0
    NIGHT_START_HOUR = 18
    NIGHT_END_HOUR = 6

    def __init__(self, init_config: dict):
        # Drones of the fleet, by drone_id.
        self.drones: Dict[str, DroneInfo] = {}
        # Flight batteries, by battery_id.
        self.batteries: Dict[str, BatteryInfo] = {}
        # Licensed pilots, by pilot_id.
        self.pilots: Dict[str, PilotInfo] = {}
        # Airspace zones missions are flown in, by zone_id.
        self.zones: Dict[str, ZoneInfo] = {}
        # Missions, by mission_id.
        self.missions: Dict[str, MissionInfo] = {}
        # Maintenance records (groundings), by record_id.
        self.maintenance_records: Dict[str, MaintenanceRecordInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - A mission refers to an existing drone, pilot and zone; no mission in a no_fly zone.
        # - The pilot must be active, hold a license valid on the mission date, hold the zone's
        #   required certification, "heavy_payload" for payloads above HEAVY_PAYLOAD_KG, and
        #   "night" for starts from NIGHT_START_HOUR to NIGHT_END_HOUR (UTC).
        # - Altitude at most the zone's max_altitude_m and REGULATORY_MAX_ALTITUDE_M; payload at
        #   most the drone's max_payload_kg; missions are scheduled in the future.
        # - A drone or a pilot never has two planned / in-progress missions that overlap in time.
        # - Grounded or retired drones take no new missions and cannot launch; a grounded drone's
        #   planned missions must be reassigned (or cancelled) before they can fly.
        # - Mission workflow: planned -> in_progress -> completed; planned -> cancelled.
        # - Launch needs an available drone with an installed battery in good health charged to
        #   at least MIN_LAUNCH_CHARGE percent.
        # - Completion adds flight time to the drone (and its hours since inspection) and to the
        #   pilot, drains the battery and adds one charge cycle; a battery reaching max_cycles is
        #   retired and removed; a drone reaching INSPECTION_INTERVAL_HOURS since its last
        #   inspection is grounded with an open maintenance record.
        # - A battery fits only drones of its model, sits in at most one drone, and cannot be
        #   swapped or charged while its drone is on a mission.
        # - Grounding opens a maintenance record; closing a drone's last open record makes it
        #   available again and resets its hours since inspection.

    def get_drone(self, drone_id: str) -> dict:
        """Get a drone by id, with its installed battery and its open maintenance records.

        Args:
            drone_id (str): The drone id, e.g. "DR-07".

        Returns:
            dict: {"success": True, "data": DroneInfo plus "battery" (BatteryInfo or None) and
            "open_maintenance" (List[str] of record ids)}, or {"success": False, "error": str}.
        """
        if not isinstance(drone_id, str) or not drone_id.strip():
            return {"success": False, "error": "drone_id must be a non-empty string."}
        drone = self.drones.get(drone_id)
        if drone is None:
            return {"success": False, "error": f"Drone {drone_id} not found."}
        data = dict(drone)
        battery = self.batteries.get(drone.get("battery_id") or "")
        data["battery"] = dict(battery) if battery is not None else None
        data["open_maintenance"] = sorted(
            str(record.get("record_id")) for record in self.maintenance_records.values()
            if record.get("drone_id") == drone_id and record.get("status") == "open")
        return {"success": True, "data": data}

    def list_drones(self, status: Optional[str] = None, model: Optional[str] = None,
                    home_base: Optional[str] = None) -> dict:
        """List drones, optionally filtered by status, model and home base.

        Args:
            status (Optional[str]): "available", "on_mission", "grounded" or "retired".
            model (Optional[str]): Only drones of this model, e.g. "Skyline X4".
            home_base (Optional[str]): Only drones based here (case-insensitive).

        Returns:
            dict: {"success": True, "data": List[DroneInfo plus "battery_charge" (int or None)]}
            sorted by drone_id, or {"success": False, "error": str}.
        """
        for label, value in (("status", status), ("model", model), ("home_base", home_base)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in self.DRONE_STATUSES:
            return {"success": False, "error": f"Unknown status {status!r}; use one of "
                                               f"{', '.join(self.DRONE_STATUSES)}."}
        found = []
        for drone in self.drones.values():
            if status is not None and drone.get("status") != status:
                continue
            if model is not None and drone.get("model") != model:
                continue
            if home_base is not None and str(drone.get("home_base", "")).lower() != home_base.lower():
                continue
            entry = dict(drone)
            battery = self.batteries.get(drone.get("battery_id") or "")
            entry["battery_charge"] = battery.get("charge_percent") if battery is not None else None
            found.append(entry)
        found.sort(key=lambda drone: str(drone.get("drone_id", "")))
        return {"success": True, "data": found}

    def get_battery(self, battery_id: str) -> dict:
        """Get a battery by id, with the cycles it has left.

        Args:
            battery_id (str): The battery id, e.g. "BAT-112".

        Returns:
            dict: {"success": True, "data": BatteryInfo plus "cycles_left" (int)}, or
            {"success": False, "error": str}.
        """
        if not isinstance(battery_id, str) or not battery_id.strip():
            return {"success": False, "error": "battery_id must be a non-empty string."}
        battery = self.batteries.get(battery_id)
        if battery is None:
            return {"success": False, "error": f"Battery {battery_id} not found."}
        data = dict(battery)
        data["cycles_left"] = max(0, int(battery.get("max_cycles", 0)) - int(battery.get("cycle_count", 0)))
        return {"success": True, "data": data}

    def list_batteries(self, model: Optional[str] = None, min_charge: Optional[int] = None,
                       spare_only: bool = False) -> dict:
        """List batteries in good health, optionally only those fitting a drone model, charged to at
        least a level, or not installed in any drone.

        Args:
            model (Optional[str]): Only batteries for this drone model.
            min_charge (Optional[int]): Only batteries charged to at least this percentage (0-100).
            spare_only (bool): Only batteries that are not installed in a drone.

        Returns:
            dict: {"success": True, "data": List[BatteryInfo]} sorted by charge (highest first), then
            id, or {"success": False, "error": str}.
        """
        if model is not None and not isinstance(model, str):
            return {"success": False, "error": "model must be a string or null."}
        if min_charge is not None and (not isinstance(min_charge, int) or isinstance(min_charge, bool)):
            return {"success": False, "error": "min_charge must be an integer or null."}
        if not isinstance(spare_only, bool):
            return {"success": False, "error": "spare_only must be a boolean."}
        if min_charge is not None and not 0 <= min_charge <= 100:
            return {"success": False, "error": "min_charge must be between 0 and 100."}
        found = [dict(battery) for battery in self.batteries.values()
                 if battery.get("health") == "good"
                 and (model is None or battery.get("model") == model)
                 and (min_charge is None or int(battery.get("charge_percent", 0)) >= min_charge)
                 and (not spare_only or not battery.get("installed_in"))]
        found.sort(key=lambda b: (-int(b.get("charge_percent", 0)), str(b.get("battery_id", ""))))
        return {"success": True, "data": found}

    def get_pilot(self, pilot_id: str) -> dict:
        """Get a pilot by id.

        Args:
            pilot_id (str): The pilot id, e.g. "PIL-03".

        Returns:
            dict: {"success": True, "data": PilotInfo}, or {"success": False, "error": str}.
        """
        if not isinstance(pilot_id, str) or not pilot_id.strip():
            return {"success": False, "error": "pilot_id must be a non-empty string."}
        pilot = self.pilots.get(pilot_id)
        if pilot is None:
            return {"success": False, "error": f"Pilot {pilot_id} not found."}
        data = dict(pilot)
        data["certifications"] = list(pilot.get("certifications", []))
        return {"success": True, "data": data}

    def list_pilots(self, name: Optional[str] = None, certification: Optional[str] = None,
                    status: Optional[str] = None) -> dict:
        """List pilots, optionally by part of their name, a certification they hold, or status.

        Args:
            name (Optional[str]): Text contained in the pilot's name (case-insensitive).
            certification (Optional[str]): Only pilots holding this certification.
            status (Optional[str]): "active" or "suspended".

        Returns:
            dict: {"success": True, "data": List[PilotInfo]} sorted by pilot_id, or
            {"success": False, "error": str}.
        """
        for label, value in (("name", name), ("certification", certification), ("status", status)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in ("active", "suspended"):
            return {"success": False, "error": "status must be 'active' or 'suspended'."}
        if certification is not None and certification not in self.CERTIFICATIONS:
            return {"success": False, "error": f"Unknown certification {certification!r}; use one of "
                                               f"{', '.join(self.CERTIFICATIONS)}."}
        found = []
        for pilot in self.pilots.values():
            if name is not None and name.strip().lower() not in str(pilot.get("name", "")).lower():
                continue
            if certification is not None and certification not in pilot.get("certifications", []):
                continue
            if status is not None and pilot.get("status") != status:
                continue
            entry = dict(pilot)
            entry["certifications"] = list(pilot.get("certifications", []))
            found.append(entry)
        found.sort(key=lambda pilot: str(pilot.get("pilot_id", "")))
        return {"success": True, "data": found}

    def find_qualified_pilots(self, zone_id: str, on_date: Optional[str] = None) -> dict:
        """List the active pilots allowed to fly in a zone on a date: license valid that day and the
        zone's required certification held.

        Args:
            zone_id (str): The zone id.
            on_date (Optional[str]): ISO date of the flight; defaults to today.

        Returns:
            dict: {"success": True, "data": List[PilotInfo]} sorted by pilot_id, or
            {"success": False, "error": str}.
        """
        if not isinstance(zone_id, str) or not zone_id.strip():
            return {"success": False, "error": "zone_id must be a non-empty string."}
        if on_date is not None and not isinstance(on_date, str):
            return {"success": False, "error": "on_date must be an ISO date string or null."}
        zone = self.zones.get(zone_id)
        if zone is None:
            return {"success": False, "error": f"Zone {zone_id} not found."}
        if zone.get("airspace_class") == "no_fly":
            return {"success": False, "error": f"Zone {zone_id} is a no-fly zone; nobody may fly there."}
        if on_date is None:
            day = datetime.now().date()
        else:
            try:
                day = date.fromisoformat(on_date[:10])
            except ValueError:
                return {"success": False, "error": f"{on_date!r} is not an ISO date (YYYY-MM-DD)."}
        required = zone.get("required_certification")
        found = []
        for pilot in self.pilots.values():
            if pilot.get("status") != "active":
                continue
            try:
                expiry = date.fromisoformat(str(pilot.get("license_expiry", "")))
            except ValueError:
                continue
            if expiry < day:
                continue
            if required and required not in pilot.get("certifications", []):
                continue
            entry = dict(pilot)
            entry["certifications"] = list(pilot.get("certifications", []))
            found.append(entry)
        found.sort(key=lambda pilot: str(pilot.get("pilot_id", "")))
        return {"success": True, "data": found}

    def list_zones(self, airspace_class: Optional[str] = None) -> dict:
        """List airspace zones, optionally only one airspace class.

        Args:
            airspace_class (Optional[str]): "open", "controlled", "restricted" or "no_fly".

        Returns:
            dict: {"success": True, "data": List[ZoneInfo]} sorted by zone_id, or
            {"success": False, "error": str}.
        """
        if airspace_class is not None and not isinstance(airspace_class, str):
            return {"success": False, "error": "airspace_class must be a string or null."}
        if airspace_class is not None and airspace_class not in self.AIRSPACE_CLASSES:
            return {"success": False, "error": f"Unknown airspace class {airspace_class!r}; use one of "
                                               f"{', '.join(self.AIRSPACE_CLASSES)}."}
        found = [dict(zone) for zone in self.zones.values()
                 if airspace_class is None or zone.get("airspace_class") == airspace_class]
        found.sort(key=lambda zone: str(zone.get("zone_id", "")))
        return {"success": True, "data": found}

    def get_mission(self, mission_id: str) -> dict:
        """Get a mission by id.

        Args:
            mission_id (str): The mission id, e.g. "MSN-0004".

        Returns:
            dict: {"success": True, "data": MissionInfo}, or {"success": False, "error": str}.
        """
        if not isinstance(mission_id, str) or not mission_id.strip():
            return {"success": False, "error": "mission_id must be a non-empty string."}
        mission = self.missions.get(mission_id)
        if mission is None:
            return {"success": False, "error": f"Mission {mission_id} not found."}
        return {"success": True, "data": dict(mission)}

    def list_missions(self, status: Optional[str] = None, drone_id: Optional[str] = None,
                      pilot_id: Optional[str] = None, zone_id: Optional[str] = None,
                      on_date: Optional[str] = None) -> dict:
        """List missions, optionally filtered by status, drone, pilot, zone and start date.

        Args:
            status (Optional[str]): "planned", "in_progress", "completed" or "cancelled".
            drone_id (Optional[str]): Only missions of this drone.
            pilot_id (Optional[str]): Only missions of this pilot.
            zone_id (Optional[str]): Only missions in this zone.
            on_date (Optional[str]): Only missions starting on this ISO date (YYYY-MM-DD).

        Returns:
            dict: {"success": True, "data": List[MissionInfo]} sorted by start time, or
            {"success": False, "error": str}.
        """
        filters = (("status", status), ("drone_id", drone_id), ("pilot_id", pilot_id),
                   ("zone_id", zone_id), ("on_date", on_date))
        for label, value in filters:
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in self.MISSION_STATUSES:
            return {"success": False, "error": f"Unknown mission status {status!r}; use one of "
                                               f"{', '.join(self.MISSION_STATUSES)}."}
        if on_date is not None:
            try:
                on_date = date.fromisoformat(on_date[:10]).isoformat()
            except ValueError:
                return {"success": False, "error": f"{on_date!r} is not an ISO date (YYYY-MM-DD)."}
        found = [dict(mission) for mission in self.missions.values()
                 if (status is None or mission.get("status") == status)
                 and (drone_id is None or mission.get("drone_id") == drone_id)
                 and (pilot_id is None or mission.get("pilot_id") == pilot_id)
                 and (zone_id is None or mission.get("zone_id") == zone_id)
                 and (on_date is None or str(mission.get("scheduled_start", ""))[:10] == on_date)]
        found.sort(key=lambda m: (str(m.get("scheduled_start", "")), str(m.get("mission_id", ""))))
        return {"success": True, "data": found}

    def list_maintenance_records(self, drone_id: Optional[str] = None,
                                 status: Optional[str] = None) -> dict:
        """List maintenance records, optionally of one drone or in one status.

        Args:
            drone_id (Optional[str]): Only records of this drone.
            status (Optional[str]): "open" or "closed".

        Returns:
            dict: {"success": True, "data": List[MaintenanceRecordInfo]} sorted by record_id, or
            {"success": False, "error": str}.
        """
        if drone_id is not None and not isinstance(drone_id, str):
            return {"success": False, "error": "drone_id must be a string or null."}
        if status is not None and not isinstance(status, str):
            return {"success": False, "error": "status must be a string or null."}
        if status is not None and status not in ("open", "closed"):
            return {"success": False, "error": "status must be 'open' or 'closed'."}
        if drone_id is not None and drone_id not in self.drones:
            return {"success": False, "error": f"Drone {drone_id} not found."}
        found = [dict(record) for record in self.maintenance_records.values()
                 if (drone_id is None or record.get("drone_id") == drone_id)
                 and (status is None or record.get("status") == status)]
        found.sort(key=lambda record: str(record.get("record_id", "")))
        return {"success": True, "data": found}

    def check_mission_readiness(self, mission_id: str) -> dict:
        """Say whether a planned mission could launch now, and list what blocks it (drone status,
        battery, pilot status and license).

        Args:
            mission_id (str): The mission id.

        Returns:
            dict: {"success": True, "data": {"mission_id", "ready" (bool), "blockers" (List[str]),
            "battery_id", "battery_charge"}}, or {"success": False, "error": str}.
        """
        if not isinstance(mission_id, str) or not mission_id.strip():
            return {"success": False, "error": "mission_id must be a non-empty string."}
        mission = self.missions.get(mission_id)
        if mission is None:
            return {"success": False, "error": f"Mission {mission_id} not found."}
        blockers = []
        if mission.get("status") != "planned":
            blockers.append(f"the mission is {mission.get('status')}")
        drone = self.drones.get(mission.get("drone_id"), {})
        if drone.get("status") != "available":
            blockers.append(f"drone {mission.get('drone_id')} is {drone.get('status', 'missing')}")
        battery = self.batteries.get(drone.get("battery_id") or "")
        if battery is None:
            blockers.append("no battery is installed")
        else:
            if battery.get("health") != "good":
                blockers.append(f"battery {battery.get('battery_id')} is retired")
            if int(battery.get("charge_percent", 0)) < self.MIN_LAUNCH_CHARGE:
                blockers.append(f"battery {battery.get('battery_id')} is at "
                                f"{battery.get('charge_percent')}%, below {self.MIN_LAUNCH_CHARGE}%")
        pilot = self.pilots.get(mission.get("pilot_id"), {})
        if pilot.get("status") != "active":
            blockers.append(f"pilot {mission.get('pilot_id')} is not active")
        try:
            if date.fromisoformat(str(pilot.get("license_expiry", ""))) < datetime.now().date():
                blockers.append(f"pilot {mission.get('pilot_id')}'s license has expired")
        except ValueError:
            blockers.append("the pilot's license expiry is unknown")
        return {"success": True, "data": {
            "mission_id": mission_id, "ready": not blockers, "blockers": blockers,
            "battery_id": battery.get("battery_id") if battery is not None else None,
            "battery_charge": battery.get("charge_percent") if battery is not None else None}}

    def schedule_mission(self, drone_id: str, pilot_id: str, zone_id: str, purpose: str,
                         scheduled_start: str, duration_minutes: int, altitude_m: int,
                         payload_kg: float = 0.0) -> dict:
        """Schedule a new mission (status "planned").

        Checks: the zone is not no-fly; the drone is neither grounded nor retired and can carry the
        payload; the pilot is active, licensed on the day and holds the zone's certification,
        "heavy_payload" above 5 kg and "night" for starts from 18:00 to 06:00 UTC; the altitude is
        within the zone's and the 120 m regulatory limit; the start is in the future; neither the
        drone nor the pilot has an overlapping planned or in-progress mission.

        Args:
            drone_id (str): The drone to fly.
            pilot_id (str): The pilot in command.
            zone_id (str): The airspace zone.
            purpose (str): What the mission is for, e.g. "Roof survey".
            scheduled_start (str): ISO date-time of the start (UTC), e.g. "2025-01-02T10:00:00".
            duration_minutes (int): Planned duration, 5 to 180 minutes.
            altitude_m (int): Planned altitude in metres (positive).
            payload_kg (float): Payload carried, in kilograms (0 or more).

        Returns:
            dict: {"success": True, "message": str, "data": MissionInfo}, or
            {"success": False, "error": str}.
        """
        for label, value in (("drone_id", drone_id), ("pilot_id", pilot_id), ("zone_id", zone_id),
                             ("purpose", purpose), ("scheduled_start", scheduled_start)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        for label, value in (("duration_minutes", duration_minutes), ("altitude_m", altitude_m)):
            if not isinstance(value, int) or isinstance(value, bool):
                return {"success": False, "error": f"{label} must be an integer."}
        if not isinstance(payload_kg, (int, float)) or isinstance(payload_kg, bool):
            return {"success": False, "error": "payload_kg must be a number."}
        drone = self.drones.get(drone_id)
        if drone is None:
            return {"success": False, "error": f"Drone {drone_id} not found."}
        pilot = self.pilots.get(pilot_id)
        if pilot is None:
            return {"success": False, "error": f"Pilot {pilot_id} not found."}
        zone = self.zones.get(zone_id)
        if zone is None:
            return {"success": False, "error": f"Zone {zone_id} not found."}
        if zone.get("airspace_class") == "no_fly":
            return {"success": False, "error": f"Zone {zone_id} is a no-fly zone."}
        if drone.get("status") in ("grounded", "retired"):
            return {"success": False, "error": f"Drone {drone_id} is {drone.get('status')} and cannot "
                                               "take missions."}
        try:
            start = datetime.fromisoformat(scheduled_start)
        except ValueError:
            return {"success": False, "error": f"{scheduled_start!r} is not an ISO date-time."}
        if start.tzinfo is not None:
            start = start.astimezone(timezone.utc).replace(tzinfo=None)
        if start <= datetime.now():
            return {"success": False, "error": "Missions must be scheduled in the future."}
        if duration_minutes < 5 or duration_minutes > 180:
            return {"success": False, "error": "duration_minutes must be between 5 and 180."}
        ceiling = min(int(zone.get("max_altitude_m", 0)), self.REGULATORY_MAX_ALTITUDE_M)
        if altitude_m <= 0 or altitude_m > ceiling:
            return {"success": False, "error": f"altitude_m must be between 1 and {ceiling} in zone "
                                               f"{zone_id}."}
        if payload_kg < 0 or payload_kg > float(drone.get("max_payload_kg", 0.0)):
            return {"success": False, "error": f"Drone {drone_id} carries at most "
                                               f"{float(drone.get('max_payload_kg', 0.0)):g} kg."}
        if pilot.get("status") != "active":
            return {"success": False, "error": f"Pilot {pilot_id} is not active."}
        try:
            expiry = date.fromisoformat(str(pilot.get("license_expiry", "")))
        except ValueError:
            return {"success": False, "error": f"Pilot {pilot_id} has no valid license expiry."}
        if expiry < start.date():
            return {"success": False, "error": f"Pilot {pilot_id}'s license expires on "
                                               f"{expiry.isoformat()}, before the mission."}
        held = pilot.get("certifications", [])
        needed = []
        if zone.get("required_certification"):
            needed.append(zone.get("required_certification"))
        if payload_kg > self.HEAVY_PAYLOAD_KG:
            needed.append("heavy_payload")
        if start.hour >= self.NIGHT_START_HOUR or start.hour < self.NIGHT_END_HOUR:
            needed.append("night")
        missing = [cert for cert in needed if cert not in held]
        if missing:
            return {"success": False, "error": f"Pilot {pilot_id} lacks the certification(s): "
                                               f"{', '.join(missing)}."}
        end = start + timedelta(minutes=duration_minutes)
        for other in self.missions.values():
            if other.get("status") not in ("planned", "in_progress"):
                continue
            if other.get("drone_id") != drone_id and other.get("pilot_id") != pilot_id:
                continue
            try:
                other_start = datetime.fromisoformat(str(other.get("scheduled_start", "")))
            except ValueError:
                continue
            if other_start.tzinfo is not None:
                other_start = other_start.astimezone(timezone.utc).replace(tzinfo=None)
            other_end = other_start + timedelta(minutes=int(other.get("duration_minutes", 0)))
            if start < other_end and other_start < end:
                who = f"drone {drone_id}" if other.get("drone_id") == drone_id else f"pilot {pilot_id}"
                return {"success": False, "error": f"The mission overlaps mission "
                                                   f"{other.get('mission_id')} of {who}."}
        number = len(self.missions) + 1
        mission_id = f"MSN-{number:04d}"
        while mission_id in self.missions:
            number += 1
            mission_id = f"MSN-{number:04d}"
        record = {"mission_id": mission_id, "drone_id": drone_id, "pilot_id": pilot_id,
                  "zone_id": zone_id, "purpose": purpose.strip(),
                  "scheduled_start": start.isoformat(timespec="seconds"),
                  "duration_minutes": duration_minutes, "altitude_m": altitude_m,
                  "payload_kg": round(float(payload_kg), 2), "status": "planned", "battery_id": None,
                  "flight_minutes": 0, "notes": None}
        self.missions[mission_id] = record
        return {"success": True, "message": f"Mission {mission_id} scheduled for "
                                            f"{record['scheduled_start']}.", "data": dict(record)}

    def reassign_mission(self, mission_id: str, drone_id: Optional[str] = None,
                         pilot_id: Optional[str] = None) -> dict:
        """Move a planned mission to another drone and/or another pilot, with the same checks as
        scheduling (drone neither grounded nor retired and able to carry the payload; pilot active,
        licensed on the day and certified for the zone, payload and time; no overlapping missions).

        Args:
            mission_id (str): The planned mission.
            drone_id (Optional[str]): The new drone, if it changes.
            pilot_id (Optional[str]): The new pilot, if it changes.

        Returns:
            dict: {"success": True, "message": str, "data": MissionInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(mission_id, str) or not mission_id.strip():
            return {"success": False, "error": "mission_id must be a non-empty string."}
        if drone_id is not None and not isinstance(drone_id, str):
            return {"success": False, "error": "drone_id must be a string or null."}
        if pilot_id is not None and not isinstance(pilot_id, str):
            return {"success": False, "error": "pilot_id must be a string or null."}
        mission = self.missions.get(mission_id)
        if mission is None:
            return {"success": False, "error": f"Mission {mission_id} not found."}
        if mission.get("status") != "planned":
            return {"success": False, "error": f"Mission {mission_id} is {mission.get('status')}; only "
                                               "planned missions can be reassigned."}
        if drone_id is None and pilot_id is None:
            return {"success": False, "error": "Give a new drone_id, a new pilot_id, or both."}
        new_drone_id = drone_id if drone_id is not None else mission.get("drone_id")
        new_pilot_id = pilot_id if pilot_id is not None else mission.get("pilot_id")
        if new_drone_id == mission.get("drone_id") and new_pilot_id == mission.get("pilot_id"):
            return {"success": False, "error": "The mission already has that drone and pilot."}
        drone = self.drones.get(new_drone_id)
        if drone is None:
            return {"success": False, "error": f"Drone {new_drone_id} not found."}
        pilot = self.pilots.get(new_pilot_id)
        if pilot is None:
            return {"success": False, "error": f"Pilot {new_pilot_id} not found."}
        if drone.get("status") in ("grounded", "retired"):
            return {"success": False, "error": f"Drone {new_drone_id} is {drone.get('status')}."}
        payload = float(mission.get("payload_kg", 0.0))
        if payload > float(drone.get("max_payload_kg", 0.0)):
            return {"success": False, "error": f"Drone {new_drone_id} carries at most "
                                               f"{float(drone.get('max_payload_kg', 0.0)):g} kg."}
        try:
            start = datetime.fromisoformat(str(mission.get("scheduled_start", "")))
        except ValueError:
            return {"success": False, "error": f"Mission {mission_id} has an invalid start time."}
        if start.tzinfo is not None:
            start = start.astimezone(timezone.utc).replace(tzinfo=None)
        if pilot.get("status") != "active":
            return {"success": False, "error": f"Pilot {new_pilot_id} is not active."}
        try:
            expiry = date.fromisoformat(str(pilot.get("license_expiry", "")))
        except ValueError:
            return {"success": False, "error": f"Pilot {new_pilot_id} has no valid license expiry."}
        if expiry < start.date():
            return {"success": False, "error": f"Pilot {new_pilot_id}'s license expires on "
                                               f"{expiry.isoformat()}, before the mission."}
        zone = self.zones.get(mission.get("zone_id"), {})
        needed = []
        if zone.get("required_certification"):
            needed.append(zone.get("required_certification"))
        if payload > self.HEAVY_PAYLOAD_KG:
            needed.append("heavy_payload")
        if start.hour >= self.NIGHT_START_HOUR or start.hour < self.NIGHT_END_HOUR:
            needed.append("night")
        missing = [cert for cert in needed if cert not in pilot.get("certifications", [])]
        if missing:
            return {"success": False, "error": f"Pilot {new_pilot_id} lacks the certification(s): "
                                               f"{', '.join(missing)}."}
        end = start + timedelta(minutes=int(mission.get("duration_minutes", 0)))
        for other in self.missions.values():
            if other.get("mission_id") == mission_id or other.get("status") not in ("planned", "in_progress"):
                continue
            if other.get("drone_id") != new_drone_id and other.get("pilot_id") != new_pilot_id:
                continue
            try:
                other_start = datetime.fromisoformat(str(other.get("scheduled_start", "")))
            except ValueError:
                continue
            if other_start.tzinfo is not None:
                other_start = other_start.astimezone(timezone.utc).replace(tzinfo=None)
            other_end = other_start + timedelta(minutes=int(other.get("duration_minutes", 0)))
            if start < other_end and other_start < end:
                return {"success": False, "error": f"The mission would overlap mission "
                                                   f"{other.get('mission_id')}."}
        mission["drone_id"] = new_drone_id
        mission["pilot_id"] = new_pilot_id
        return {"success": True, "message": f"Mission {mission_id} now flies with drone {new_drone_id} "
                                            f"and pilot {new_pilot_id}.", "data": dict(mission)}

    def start_mission(self, mission_id: str) -> dict:
        """Launch a planned mission: the drone must be available with a good battery charged to at
        least 80%, and the pilot active, licensed today and not flying another mission.

        Args:
            mission_id (str): The planned mission.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(mission_id, str) or not mission_id.strip():
            return {"success": False, "error": "mission_id must be a non-empty string."}
        mission = self.missions.get(mission_id)
        if mission is None:
            return {"success": False, "error": f"Mission {mission_id} not found."}
        if mission.get("status") != "planned":
            return {"success": False, "error": f"Mission {mission_id} is {mission.get('status')}; only "
                                               "planned missions can start."}
        drone = self.drones.get(mission.get("drone_id"))
        if drone is None:
            return {"success": False, "error": "The mission's drone no longer exists."}
        if drone.get("status") != "available":
            return {"success": False, "error": f"Drone {drone.get('drone_id')} is {drone.get('status')}."}
        battery = self.batteries.get(drone.get("battery_id") or "")
        if battery is None:
            return {"success": False, "error": f"Drone {drone.get('drone_id')} has no battery installed."}
        if battery.get("health") != "good":
            return {"success": False, "error": f"Battery {battery.get('battery_id')} is retired."}
        if int(battery.get("charge_percent", 0)) < self.MIN_LAUNCH_CHARGE:
            return {"success": False, "error": f"Battery {battery.get('battery_id')} is at "
                                               f"{battery.get('charge_percent')}%; launch needs "
                                               f"{self.MIN_LAUNCH_CHARGE}%."}
        pilot = self.pilots.get(mission.get("pilot_id"))
        if pilot is None or pilot.get("status") != "active":
            return {"success": False, "error": f"Pilot {mission.get('pilot_id')} is not active."}
        try:
            expiry = date.fromisoformat(str(pilot.get("license_expiry", "")))
        except ValueError:
            return {"success": False, "error": "The pilot's license expiry is invalid."}
        if expiry < datetime.now().date():
            return {"success": False, "error": f"Pilot {mission.get('pilot_id')}'s license has expired."}
        for other in self.missions.values():
            if other.get("status") == "in_progress" and other.get("pilot_id") == mission.get("pilot_id"):
                return {"success": False, "error": f"Pilot {mission.get('pilot_id')} is flying mission "
                                                   f"{other.get('mission_id')}."}
        mission["status"] = "in_progress"
        mission["battery_id"] = battery.get("battery_id")
        drone["status"] = "on_mission"
        return {"success": True, "message": f"Mission {mission_id} launched with drone "
                                            f"{drone.get('drone_id')} on battery "
                                            f"{battery.get('battery_id')}."}

    def complete_mission(self, mission_id: str, flight_minutes: int, battery_used_percent: int) -> dict:
        """Complete an in-progress mission and book its flight time and battery use.

        The drone and the pilot gain the flight time; the battery loses the charge used and gains one
        cycle (at max_cycles it is retired and removed from the drone); a drone that reaches 50 flight
        hours since its last inspection is grounded with an open maintenance record, otherwise it is
        available again.

        Args:
            mission_id (str): The mission in progress.
            flight_minutes (int): Actual flight time, 1 to 240 minutes.
            battery_used_percent (int): Charge used, 1 to the battery's current charge.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(mission_id, str) or not mission_id.strip():
            return {"success": False, "error": "mission_id must be a non-empty string."}
        for label, value in (("flight_minutes", flight_minutes),
                             ("battery_used_percent", battery_used_percent)):
            if not isinstance(value, int) or isinstance(value, bool):
                return {"success": False, "error": f"{label} must be an integer."}
        mission = self.missions.get(mission_id)
        if mission is None:
            return {"success": False, "error": f"Mission {mission_id} not found."}
        if mission.get("status") != "in_progress":
            return {"success": False, "error": f"Mission {mission_id} is {mission.get('status')}; only "
                                               "missions in progress can be completed."}
        if flight_minutes < 1 or flight_minutes > 240:
            return {"success": False, "error": "flight_minutes must be between 1 and 240."}
        drone = self.drones.get(mission.get("drone_id"))
        battery = self.batteries.get(mission.get("battery_id") or "")
        pilot = self.pilots.get(mission.get("pilot_id"))
        if drone is None or battery is None or pilot is None:
            return {"success": False, "error": "The mission's drone, battery or pilot is missing."}
        charge = int(battery.get("charge_percent", 0))
        if battery_used_percent < 1 or battery_used_percent > charge:
            return {"success": False, "error": f"battery_used_percent must be between 1 and {charge}."}
        hours = round(flight_minutes / 60, 2)
        mission["status"] = "completed"
        mission["flight_minutes"] = flight_minutes
        battery["charge_percent"] = charge - battery_used_percent
        battery["cycle_count"] = int(battery.get("cycle_count", 0)) + 1
        notes = []
        if battery["cycle_count"] >= int(battery.get("max_cycles", 0)):
            battery["health"] = "retired"
            battery["installed_in"] = None
            if drone.get("battery_id") == battery.get("battery_id"):
                drone["battery_id"] = None
            notes.append(f"battery {battery.get('battery_id')} reached its cycle limit and was retired")
        pilot["flight_hours"] = round(float(pilot.get("flight_hours", 0.0)) + hours, 2)
        drone["flight_hours"] = round(float(drone.get("flight_hours", 0.0)) + hours, 2)
        drone["hours_since_inspection"] = round(float(drone.get("hours_since_inspection", 0.0)) + hours, 2)
        if drone["hours_since_inspection"] >= self.INSPECTION_INTERVAL_HOURS:
            drone["status"] = "grounded"
            number = len(self.maintenance_records) + 1
            record_id = f"MR-{number:04d}"
            while record_id in self.maintenance_records:
                number += 1
                record_id = f"MR-{number:04d}"
            self.maintenance_records[record_id] = {
                "record_id": record_id, "drone_id": drone.get("drone_id"),
                "opened_date": datetime.now().date().isoformat(),
                "issue": f"Scheduled inspection due after {drone['hours_since_inspection']:g} flight hours",
                "status": "open", "closed_date": None, "resolution": None}
            notes.append(f"drone {drone.get('drone_id')} is due for inspection and was grounded "
                         f"({record_id})")
        else:
            drone["status"] = "available"
        message = f"Mission {mission_id} completed after {flight_minutes} minutes."
        if notes:
            message += " Note: " + "; ".join(notes) + "."
        return {"success": True, "message": message}

    def cancel_mission(self, mission_id: str, reason: str) -> dict:
        """Cancel a planned mission, keeping the reason in its notes.

        Args:
            mission_id (str): The planned mission.
            reason (str): Why it is cancelled.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(mission_id, str) or not mission_id.strip():
            return {"success": False, "error": "mission_id must be a non-empty string."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        mission = self.missions.get(mission_id)
        if mission is None:
            return {"success": False, "error": f"Mission {mission_id} not found."}
        if mission.get("status") != "planned":
            return {"success": False, "error": f"Mission {mission_id} is {mission.get('status')}; only "
                                               "planned missions can be cancelled."}
        mission["status"] = "cancelled"
        mission["notes"] = reason.strip()
        return {"success": True, "message": f"Mission {mission_id} cancelled."}

    def install_battery(self, drone_id: str, battery_id: str) -> dict:
        """Install a battery in a drone, replacing (and removing) the battery it had.

        The battery must be in good health, made for the drone's model and not installed in another
        drone; the drone must not be on a mission or retired.

        Args:
            drone_id (str): The drone.
            battery_id (str): The battery to install.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(drone_id, str) or not drone_id.strip():
            return {"success": False, "error": "drone_id must be a non-empty string."}
        if not isinstance(battery_id, str) or not battery_id.strip():
            return {"success": False, "error": "battery_id must be a non-empty string."}
        drone = self.drones.get(drone_id)
        if drone is None:
            return {"success": False, "error": f"Drone {drone_id} not found."}
        battery = self.batteries.get(battery_id)
        if battery is None:
            return {"success": False, "error": f"Battery {battery_id} not found."}
        if drone.get("status") in ("on_mission", "retired"):
            return {"success": False, "error": f"Drone {drone_id} is {drone.get('status')}; its battery "
                                               "cannot be changed."}
        if battery.get("health") != "good":
            return {"success": False, "error": f"Battery {battery_id} is retired."}
        if battery.get("model") != drone.get("model"):
            return {"success": False, "error": f"Battery {battery_id} is for the {battery.get('model')}, "
                                               f"not the {drone.get('model')}."}
        if battery.get("installed_in") == drone_id:
            return {"success": False, "error": f"Battery {battery_id} is already in drone {drone_id}."}
        if battery.get("installed_in"):
            return {"success": False, "error": f"Battery {battery_id} is installed in drone "
                                               f"{battery.get('installed_in')}."}
        old = self.batteries.get(drone.get("battery_id") or "")
        if old is not None:
            old["installed_in"] = None
        battery["installed_in"] = drone_id
        drone["battery_id"] = battery_id
        message = f"Battery {battery_id} installed in drone {drone_id}"
        if old is not None:
            message += f"; battery {old.get('battery_id')} removed"
        return {"success": True, "message": message + "."}

    def charge_battery(self, battery_id: str, target_percent: int = 100) -> dict:
        """Charge a battery up to a target level (not while its drone is flying).

        Args:
            battery_id (str): The battery.
            target_percent (int): The charge to reach, above the current charge and at most 100.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(battery_id, str) or not battery_id.strip():
            return {"success": False, "error": "battery_id must be a non-empty string."}
        if not isinstance(target_percent, int) or isinstance(target_percent, bool):
            return {"success": False, "error": "target_percent must be an integer."}
        battery = self.batteries.get(battery_id)
        if battery is None:
            return {"success": False, "error": f"Battery {battery_id} not found."}
        if battery.get("health") != "good":
            return {"success": False, "error": f"Battery {battery_id} is retired."}
        drone = self.drones.get(battery.get("installed_in") or "")
        if drone is not None and drone.get("status") == "on_mission":
            return {"success": False, "error": f"Battery {battery_id} is flying in drone "
                                               f"{drone.get('drone_id')}."}
        current = int(battery.get("charge_percent", 0))
        if target_percent > 100 or target_percent <= current:
            return {"success": False, "error": f"target_percent must be above the current {current}% "
                                               "and at most 100."}
        battery["charge_percent"] = target_percent
        return {"success": True, "message": f"Battery {battery_id} charged to {target_percent}%."}

    def ground_drone(self, drone_id: str, issue: str) -> dict:
        """Ground a drone for maintenance and open a maintenance record.

        The drone must not be flying or retired. Its planned missions stay planned but cannot launch
        until they are reassigned to another drone (or cancelled); they are listed in the result.

        Args:
            drone_id (str): The drone.
            issue (str): What needs attention, e.g. "Propeller inspection".

        Returns:
            dict: {"success": True, "message": str, "data": {"record_id", "missions_to_reassign":
            List[str]}}, or {"success": False, "error": str}.
        """
        if not isinstance(drone_id, str) or not drone_id.strip():
            return {"success": False, "error": "drone_id must be a non-empty string."}
        if not isinstance(issue, str) or not issue.strip():
            return {"success": False, "error": "issue must be a non-empty string."}
        drone = self.drones.get(drone_id)
        if drone is None:
            return {"success": False, "error": f"Drone {drone_id} not found."}
        if drone.get("status") == "on_mission":
            return {"success": False, "error": f"Drone {drone_id} is flying; complete its mission first."}
        if drone.get("status") == "retired":
            return {"success": False, "error": f"Drone {drone_id} is retired."}
        number = len(self.maintenance_records) + 1
        record_id = f"MR-{number:04d}"
        while record_id in self.maintenance_records:
            number += 1
            record_id = f"MR-{number:04d}"
        self.maintenance_records[record_id] = {
            "record_id": record_id, "drone_id": drone_id,
            "opened_date": datetime.now().date().isoformat(), "issue": issue.strip(), "status": "open",
            "closed_date": None, "resolution": None}
        drone["status"] = "grounded"
        planned = sorted(str(m.get("mission_id")) for m in self.missions.values()
                         if m.get("drone_id") == drone_id and m.get("status") == "planned")
        return {"success": True, "message": f"Drone {drone_id} grounded ({record_id}).",
                "data": {"record_id": record_id, "missions_to_reassign": planned}}

    def close_maintenance_record(self, record_id: str, resolution: str) -> dict:
        """Close an open maintenance record. When it was the drone's last open record, the drone is
        available again, inspected today, with its hours since inspection reset to zero.

        Args:
            record_id (str): The maintenance record.
            resolution (str): What was done.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(record_id, str) or not record_id.strip():
            return {"success": False, "error": "record_id must be a non-empty string."}
        if not isinstance(resolution, str) or not resolution.strip():
            return {"success": False, "error": "resolution must be a non-empty string."}
        record = self.maintenance_records.get(record_id)
        if record is None:
            return {"success": False, "error": f"Maintenance record {record_id} not found."}
        if record.get("status") != "open":
            return {"success": False, "error": f"Maintenance record {record_id} is already closed."}
        today = datetime.now().date().isoformat()
        record["status"] = "closed"
        record["closed_date"] = today
        record["resolution"] = resolution.strip()
        drone = self.drones.get(record.get("drone_id"))
        message = f"Maintenance record {record_id} closed."
        still_open = [r for r in self.maintenance_records.values()
                      if r.get("drone_id") == record.get("drone_id") and r.get("status") == "open"]
        if drone is not None and not still_open and drone.get("status") == "grounded":
            drone["status"] = "available"
            drone["last_inspection_date"] = today
            drone["hours_since_inspection"] = 0.0
            message += f" Drone {drone.get('drone_id')} is available again."
        return {"success": True, "message": message}

    def add_pilot_certification(self, pilot_id: str, certification: str) -> dict:
        """Record a new certification for an active pilot.

        Args:
            pilot_id (str): The pilot.
            certification (str): One of "basic", "night", "bvlos", "controlled_airspace",
                "restricted_ops", "heavy_payload".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(pilot_id, str) or not pilot_id.strip():
            return {"success": False, "error": "pilot_id must be a non-empty string."}
        if not isinstance(certification, str):
            return {"success": False, "error": "certification must be a string."}
        if certification not in self.CERTIFICATIONS:
            return {"success": False, "error": f"Unknown certification {certification!r}; use one of "
                                               f"{', '.join(self.CERTIFICATIONS)}."}
        pilot = self.pilots.get(pilot_id)
        if pilot is None:
            return {"success": False, "error": f"Pilot {pilot_id} not found."}
        if pilot.get("status") != "active":
            return {"success": False, "error": f"Pilot {pilot_id} is suspended."}
        held = list(pilot.get("certifications", []))
        if certification in held:
            return {"success": False, "error": f"Pilot {pilot_id} already holds {certification}."}
        held.append(certification)
        pilot["certifications"] = held
        return {"success": True, "message": f"Pilot {pilot_id} now holds {certification}."}
