from datetime import datetime, timedelta
from typing import Dict, Optional, TypedDict


class ClinicianInfo(TypedDict):
    clinician_id: str
    name: str
    specialty: str  # e.g. "General practice", "Cardiology", "Dermatology"
    requires_referral: bool  # specialists see patients only on a valid referral
    accepts_new_patients: bool
    status: str  # "active" | "on_leave" | "retired"


class PatientInfo(TypedDict):
    patient_id: str
    name: str
    date_of_birth: str  # ISO date
    phone: str
    email: str
    primary_clinician_id: Optional[str]
    no_show_count: int
    status: str  # "active" | "inactive"


class SlotInfo(TypedDict):
    slot_id: str
    clinician_id: str
    start: str  # ISO 8601 date-time
    end: str  # ISO 8601 date-time
    room: str
    status: str  # "open" | "booked" | "blocked"


class AppointmentInfo(TypedDict):
    appointment_id: str
    patient_id: str
    clinician_id: str
    slot_id: str
    reason: str
    referral_id: Optional[str]
    status: str  # "scheduled" | "completed" | "cancelled" | "no_show"
    reschedule_count: int
    notes: str  # visit notes, or the reason of a cancellation


class ReferralInfo(TypedDict):
    referral_id: str
    patient_id: str
    referring_clinician_id: str
    specialty: str
    reason: str
    issued_date: str  # ISO date
    expiry_date: str  # ISO date; the referral covers visits up to and including this day
    visits_allowed: int
    visits_used: int
    status: str  # "open" | "used" | "cancelled"


class ClinicBookingDesk:
    MAX_SCHEDULED_PER_PATIENT = 3
    MAX_RESCHEDULES = 2
    NO_SHOW_LIMIT = 3
    MAX_REFERRAL_VISITS = 6
    MAX_REFERRAL_DAYS = 180

    def __init__(self, init_config: dict):
        # Clinicians of the clinic, by clinician_id.
        self.clinicians: Dict[str, ClinicianInfo] = {}
        # Registered patients, by patient_id.
        self.patients: Dict[str, PatientInfo] = {}
        # Bookable time slots of the clinicians, by slot_id.
        self.slots: Dict[str, SlotInfo] = {}
        # Appointments, by appointment_id.
        self.appointments: Dict[str, AppointmentInfo] = {}
        # Referrals to specialties, by referral_id.
        self.referrals: Dict[str, ReferralInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - An appointment refers to an existing patient, clinician and slot; its clinician is
        #   the slot's clinician.
        # - A slot holds at most one scheduled appointment: booking marks it "booked"; cancelling
        #   the appointment or moving it away marks it "open" again. Blocked slots cannot be
        #   booked, and only open slots can be blocked.
        # - Only active patients can book, and not once they have NO_SHOW_LIMIT (3) no-shows.
        # - Only open slots of active clinicians that start after the current time can be booked.
        # - A clinician who does not accept new patients only books patients whose primary
        #   clinician they are or who completed an appointment with them before.
        # - A clinician who requires a referral only books with an open referral of the patient
        #   for that specialty, unexpired on the day of the slot, with visits left; booking uses
        #   one visit (the last one marks the referral "used"); cancelling gives the visit back.
        # - A patient holds at most MAX_SCHEDULED_PER_PATIENT (3) scheduled appointments, never
        #   two that overlap in time.
        # - Only scheduled appointments can be cancelled or rescheduled; an appointment can be
        #   rescheduled at most MAX_RESCHEDULES (2) times, to an open future slot of an active
        #   clinician of the same specialty.
        # - Only scheduled appointments whose start has passed can be completed or marked as a
        #   no-show; a no-show adds one to the patient's no_show_count.
        # - Referrals are issued by an active clinician to a specialty that an active clinician
        #   offers, for 1 to MAX_REFERRAL_VISITS (6) visits and 1 to MAX_REFERRAL_DAYS (180) days.

    def get_patient(self, patient_id: str) -> dict:
        """Get a patient's record together with a count of their scheduled appointments.

        Args:
            patient_id (str): The patient's id, e.g. "P-101".

        Returns:
            dict: {"success": True, "data": PatientInfo plus "scheduled_appointments" (int)},
            or {"success": False, "error": str}.
        """
        if not isinstance(patient_id, str) or not patient_id.strip():
            return {"success": False, "error": "patient_id must be a non-empty string."}
        patient = self.patients.get(patient_id)
        if patient is None:
            return {"success": False, "error": f"Patient {patient_id} not found."}
        data = dict(patient)
        data["scheduled_appointments"] = sum(
            1 for appointment in self.appointments.values()
            if appointment["patient_id"] == patient_id and appointment["status"] == "scheduled")
        return {"success": True, "data": data}

    def find_patients(self, name: str, date_of_birth: Optional[str] = None) -> dict:
        """Find patients whose name contains the given text (case-insensitive), optionally only
        those born on a given day.

        Args:
            name (str): Part of the patient's name, e.g. "okafor".
            date_of_birth (Optional[str]): Only patients born on this day (YYYY-MM-DD).

        Returns:
            dict: {"success": True, "data": [PatientInfo, ...]} sorted by patient id (possibly
            empty), or {"success": False, "error": str}.
        """
        if not isinstance(name, str) or not name.strip():
            return {"success": False, "error": "name must be a non-empty string."}
        if date_of_birth is not None and not isinstance(date_of_birth, str):
            return {"success": False, "error": "date_of_birth must be a string (YYYY-MM-DD) or null."}
        needle = name.strip().lower()
        found = []
        for patient_id in sorted(self.patients):
            patient = self.patients[patient_id]
            if needle not in patient["name"].lower():
                continue
            if date_of_birth is not None and patient["date_of_birth"] != date_of_birth.strip():
                continue
            found.append(dict(patient))
        return {"success": True, "data": found}

    def get_clinician(self, clinician_id: str) -> dict:
        """Get a clinician's record with the number of open future slots they have.

        Args:
            clinician_id (str): The clinician's id, e.g. "C-01".

        Returns:
            dict: {"success": True, "data": ClinicianInfo plus "open_future_slots" (int)}, or
            {"success": False, "error": str}.
        """
        if not isinstance(clinician_id, str) or not clinician_id.strip():
            return {"success": False, "error": "clinician_id must be a non-empty string."}
        clinician = self.clinicians.get(clinician_id)
        if clinician is None:
            return {"success": False, "error": f"Clinician {clinician_id} not found."}
        now = datetime.now()
        count = 0
        for slot in self.slots.values():
            if slot["clinician_id"] != clinician_id or slot["status"] != "open":
                continue
            try:
                start = datetime.fromisoformat(slot["start"]).replace(tzinfo=None)
            except (TypeError, ValueError):
                continue
            if start > now:
                count += 1
        data = dict(clinician)
        data["open_future_slots"] = count
        return {"success": True, "data": data}

    def list_clinicians(self, specialty: Optional[str] = None, status: Optional[str] = None) -> dict:
        """List clinicians, optionally filtered by specialty (case-insensitive) and status.

        Args:
            specialty (Optional[str]): e.g. "Cardiology"; all specialties when omitted.
            status (Optional[str]): "active", "on_leave" or "retired"; all when omitted.

        Returns:
            dict: {"success": True, "data": [ClinicianInfo, ...]} sorted by id, or
            {"success": False, "error": str}.
        """
        if specialty is not None and not isinstance(specialty, str):
            return {"success": False, "error": "specialty must be a string or null."}
        if status is not None and not isinstance(status, str):
            return {"success": False, "error": "status must be a string or null."}
        if status is not None and status not in ("active", "on_leave", "retired"):
            return {"success": False, "error": "status must be 'active', 'on_leave' or 'retired'."}
        found = []
        for clinician_id in sorted(self.clinicians):
            clinician = self.clinicians[clinician_id]
            if specialty is not None and clinician["specialty"].lower() != specialty.strip().lower():
                continue
            if status is not None and clinician["status"] != status:
                continue
            found.append(dict(clinician))
        return {"success": True, "data": found}

    def list_available_slots(self, specialty: Optional[str] = None,
                             clinician_id: Optional[str] = None,
                             date: Optional[str] = None) -> dict:
        """List open slots that start after the current time, of active clinicians, filtered by
        specialty, clinician and/or day.

        Args:
            specialty (Optional[str]): Only slots of clinicians of this specialty.
            clinician_id (Optional[str]): Only slots of this clinician.
            date (Optional[str]): Only slots starting on this day (YYYY-MM-DD).

        Returns:
            dict: {"success": True, "data": [SlotInfo plus "clinician_name" and "specialty"]}
            sorted by start time, or {"success": False, "error": str}.
        """
        for label, value in (("specialty", specialty), ("clinician_id", clinician_id),
                             ("date", date)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if clinician_id is not None and clinician_id not in self.clinicians:
            return {"success": False, "error": f"Clinician {clinician_id} not found."}
        day = None
        if date is not None:
            try:
                day = datetime.fromisoformat(date.strip()).date().isoformat()
            except ValueError:
                return {"success": False, "error": f"Invalid date {date!r}; use YYYY-MM-DD."}
        now = datetime.now()
        found = []
        for slot in self.slots.values():
            if slot["status"] != "open":
                continue
            clinician = self.clinicians.get(slot["clinician_id"])
            if clinician is None or clinician["status"] != "active":
                continue
            if clinician_id is not None and slot["clinician_id"] != clinician_id:
                continue
            if specialty is not None and clinician["specialty"].lower() != specialty.strip().lower():
                continue
            try:
                start = datetime.fromisoformat(slot["start"]).replace(tzinfo=None)
            except (TypeError, ValueError):
                continue
            if start <= now:
                continue
            if day is not None and start.date().isoformat() != day:
                continue
            entry = dict(slot)
            entry["clinician_name"] = clinician["name"]
            entry["specialty"] = clinician["specialty"]
            found.append(entry)
        found.sort(key=lambda entry: (entry["start"], entry["slot_id"]))
        return {"success": True, "data": found}

    def get_appointment(self, appointment_id: str) -> dict:
        """Get an appointment with the time of its slot.

        Args:
            appointment_id (str): The appointment's id, e.g. "APT-0007".

        Returns:
            dict: {"success": True, "data": AppointmentInfo plus "start" and "end"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(appointment_id, str) or not appointment_id.strip():
            return {"success": False, "error": "appointment_id must be a non-empty string."}
        appointment = self.appointments.get(appointment_id)
        if appointment is None:
            return {"success": False, "error": f"Appointment {appointment_id} not found."}
        data = dict(appointment)
        slot = self.slots.get(appointment["slot_id"])
        data["start"] = slot["start"] if slot else None
        data["end"] = slot["end"] if slot else None
        return {"success": True, "data": data}

    def list_patient_appointments(self, patient_id: str, status: Optional[str] = None) -> dict:
        """List a patient's appointments with their times, optionally only those of one status.

        Args:
            patient_id (str): The patient's id.
            status (Optional[str]): "scheduled", "completed", "cancelled" or "no_show".

        Returns:
            dict: {"success": True, "data": [AppointmentInfo plus "start", "clinician_name"]}
            sorted by start time, or {"success": False, "error": str}.
        """
        if not isinstance(patient_id, str) or not patient_id.strip():
            return {"success": False, "error": "patient_id must be a non-empty string."}
        if status is not None and not isinstance(status, str):
            return {"success": False, "error": "status must be a string or null."}
        if status is not None and status not in ("scheduled", "completed", "cancelled", "no_show"):
            return {"success": False, "error": "status must be scheduled, completed, cancelled or no_show."}
        if patient_id not in self.patients:
            return {"success": False, "error": f"Patient {patient_id} not found."}
        found = []
        for appointment in self.appointments.values():
            if appointment["patient_id"] != patient_id:
                continue
            if status is not None and appointment["status"] != status:
                continue
            entry = dict(appointment)
            slot = self.slots.get(appointment["slot_id"])
            clinician = self.clinicians.get(appointment["clinician_id"])
            entry["start"] = slot["start"] if slot else ""
            entry["clinician_name"] = clinician["name"] if clinician else ""
            found.append(entry)
        found.sort(key=lambda entry: (entry["start"], entry["appointment_id"]))
        return {"success": True, "data": found}

    def list_clinician_schedule(self, clinician_id: str, date: str) -> dict:
        """List a clinician's slots on one day with the appointment booked in each.

        Args:
            clinician_id (str): The clinician's id.
            date (str): The day (YYYY-MM-DD).

        Returns:
            dict: {"success": True, "data": [{"slot": SlotInfo, "appointment": AppointmentInfo
            or None}]} sorted by start time, or {"success": False, "error": str}.
        """
        if not isinstance(clinician_id, str) or not clinician_id.strip():
            return {"success": False, "error": "clinician_id must be a non-empty string."}
        if not isinstance(date, str):
            return {"success": False, "error": "date must be a string (YYYY-MM-DD)."}
        if clinician_id not in self.clinicians:
            return {"success": False, "error": f"Clinician {clinician_id} not found."}
        try:
            day = datetime.fromisoformat(date.strip()).date().isoformat()
        except ValueError:
            return {"success": False, "error": f"Invalid date {date!r}; use YYYY-MM-DD."}
        found = []
        for slot in self.slots.values():
            if slot["clinician_id"] != clinician_id or not slot["start"].startswith(day):
                continue
            booked = None
            for appointment in self.appointments.values():
                if appointment["slot_id"] == slot["slot_id"] and appointment["status"] != "cancelled":
                    booked = dict(appointment)
            found.append({"slot": dict(slot), "appointment": booked})
        found.sort(key=lambda entry: (entry["slot"]["start"], entry["slot"]["slot_id"]))
        return {"success": True, "data": found}

    def list_patient_referrals(self, patient_id: str, usable_only: bool = False) -> dict:
        """List a patient's referrals; with usable_only, only open, unexpired ones with visits
        left.

        Args:
            patient_id (str): The patient's id.
            usable_only (bool): Only referrals that can still be used for a booking today.

        Returns:
            dict: {"success": True, "data": [ReferralInfo plus "visits_left"]} sorted by id, or
            {"success": False, "error": str}.
        """
        if not isinstance(patient_id, str) or not patient_id.strip():
            return {"success": False, "error": "patient_id must be a non-empty string."}
        if not isinstance(usable_only, bool):
            return {"success": False, "error": "usable_only must be a boolean."}
        if patient_id not in self.patients:
            return {"success": False, "error": f"Patient {patient_id} not found."}
        today = datetime.now().date().isoformat()
        found = []
        for referral_id in sorted(self.referrals):
            referral = self.referrals[referral_id]
            if referral["patient_id"] != patient_id:
                continue
            left = referral["visits_allowed"] - referral["visits_used"]
            if usable_only and (referral["status"] != "open" or left <= 0
                                or referral["expiry_date"] < today):
                continue
            entry = dict(referral)
            entry["visits_left"] = left
            found.append(entry)
        return {"success": True, "data": found}

    def get_referral(self, referral_id: str) -> dict:
        """Get a referral by id.

        Args:
            referral_id (str): The referral's id, e.g. "REF-0003".

        Returns:
            dict: {"success": True, "data": ReferralInfo plus "visits_left"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(referral_id, str) or not referral_id.strip():
            return {"success": False, "error": "referral_id must be a non-empty string."}
        referral = self.referrals.get(referral_id)
        if referral is None:
            return {"success": False, "error": f"Referral {referral_id} not found."}
        data = dict(referral)
        data["visits_left"] = referral["visits_allowed"] - referral["visits_used"]
        return {"success": True, "data": data}

    def check_booking_eligibility(self, patient_id: str, slot_id: str) -> dict:
        """Explain whether a patient could book a slot now, without booking it: every rule that
        would refuse the booking, and the referrals that could cover it.

        Args:
            patient_id (str): The patient's id.
            slot_id (str): The slot to check.

        Returns:
            dict: {"success": True, "data": {"eligible": bool, "reasons": [str],
            "usable_referral_ids": [str]}}, or {"success": False, "error": str} for unknown ids.
        """
        if not isinstance(patient_id, str) or not isinstance(slot_id, str):
            return {"success": False, "error": "patient_id and slot_id must be strings."}
        patient = self.patients.get(patient_id)
        if patient is None:
            return {"success": False, "error": f"Patient {patient_id} not found."}
        slot = self.slots.get(slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        reasons = []
        clinician = self.clinicians.get(slot["clinician_id"])
        if patient["status"] != "active":
            reasons.append("the patient is not active")
        if patient["no_show_count"] >= self.NO_SHOW_LIMIT:
            reasons.append(f"the patient has {patient['no_show_count']} no-shows")
        if slot["status"] != "open":
            reasons.append(f"the slot is {slot['status']}")
        if clinician is None or clinician["status"] != "active":
            reasons.append("the clinician is not available")
        try:
            start = datetime.fromisoformat(slot["start"]).replace(tzinfo=None)
            end = datetime.fromisoformat(slot["end"]).replace(tzinfo=None)
        except (TypeError, ValueError):
            return {"success": False, "error": f"Slot {slot_id} has invalid times."}
        if start <= datetime.now():
            reasons.append("the slot has already started")
        if clinician is not None and not clinician["accepts_new_patients"] \
                and patient["primary_clinician_id"] != clinician["clinician_id"] \
                and not any(a["patient_id"] == patient_id and a["clinician_id"] == clinician["clinician_id"]
                            and a["status"] == "completed" for a in self.appointments.values()):
            reasons.append("the clinician does not accept new patients")
        scheduled = [a for a in self.appointments.values()
                     if a["patient_id"] == patient_id and a["status"] == "scheduled"]
        if len(scheduled) >= self.MAX_SCHEDULED_PER_PATIENT:
            reasons.append(f"the patient already has {len(scheduled)} scheduled appointments")
        for appointment in scheduled:
            other = self.slots.get(appointment["slot_id"])
            if other is None:
                continue
            try:
                other_start = datetime.fromisoformat(other["start"]).replace(tzinfo=None)
                other_end = datetime.fromisoformat(other["end"]).replace(tzinfo=None)
            except (TypeError, ValueError):
                continue
            if other_start < end and start < other_end:
                reasons.append(f"it overlaps appointment {appointment['appointment_id']}")
        usable = []
        if clinician is not None:
            for referral_id in sorted(self.referrals):
                referral = self.referrals[referral_id]
                if referral["patient_id"] == patient_id and referral["status"] == "open" \
                        and referral["specialty"].lower() == clinician["specialty"].lower() \
                        and referral["visits_used"] < referral["visits_allowed"] \
                        and referral["expiry_date"] >= start.date().isoformat():
                    usable.append(referral_id)
            if clinician["requires_referral"] and not usable:
                reasons.append(f"{clinician['specialty']} needs a referral and the patient has no usable one")
        return {"success": True, "data": {"eligible": not reasons, "reasons": reasons,
                                          "usable_referral_ids": usable}}

    def register_patient(self, name: str, date_of_birth: str, phone: str, email: str,
                         primary_clinician_id: Optional[str] = None) -> dict:
        """Register a new active patient. Patient ids are given in order: P-0001, P-0002, ...
        (the next free number after the count of patients).

        Args:
            name (str): Full name.
            date_of_birth (str): YYYY-MM-DD, not in the future.
            phone (str): Phone number.
            email (str): Email address (must contain "@").
            primary_clinician_id (Optional[str]): An active clinician to be the primary one.

        Returns:
            dict: {"success": True, "message": str, "data": {"patient_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("name", name), ("date_of_birth", date_of_birth), ("phone", phone),
                             ("email", email)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        if primary_clinician_id is not None and not isinstance(primary_clinician_id, str):
            return {"success": False, "error": "primary_clinician_id must be a string or null."}
        if "@" not in email:
            return {"success": False, "error": "email must be an email address."}
        try:
            born = datetime.fromisoformat(date_of_birth.strip()).date()
        except ValueError:
            return {"success": False, "error": f"Invalid date_of_birth {date_of_birth!r}; use YYYY-MM-DD."}
        if born > datetime.now().date():
            return {"success": False, "error": "date_of_birth cannot be in the future."}
        if primary_clinician_id is not None:
            clinician = self.clinicians.get(primary_clinician_id)
            if clinician is None or clinician["status"] != "active":
                return {"success": False, "error": f"Clinician {primary_clinician_id} is not an active clinician."}
        for patient in self.patients.values():
            if patient["name"].lower() == name.strip().lower() and patient["date_of_birth"] == born.isoformat():
                return {"success": False, "error": f"A patient with this name and date of birth is already registered ({patient['patient_id']})."}
        number = len(self.patients) + 1
        while f"P-{number:04d}" in self.patients:
            number += 1
        patient_id = f"P-{number:04d}"
        self.patients[patient_id] = {
            "patient_id": patient_id, "name": name.strip(), "date_of_birth": born.isoformat(),
            "phone": phone.strip(), "email": email.strip(),
            "primary_clinician_id": primary_clinician_id, "no_show_count": 0, "status": "active"}
        return {"success": True, "message": f"Patient {patient_id} registered.",
                "data": {"patient_id": patient_id}}

    def update_patient_contact(self, patient_id: str, phone: Optional[str] = None,
                               email: Optional[str] = None) -> dict:
        """Change a patient's phone number and/or email address.

        Args:
            patient_id (str): The patient's id.
            phone (Optional[str]): The new phone number.
            email (Optional[str]): The new email address (must contain "@").

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(patient_id, str) or not patient_id.strip():
            return {"success": False, "error": "patient_id must be a non-empty string."}
        if phone is not None and (not isinstance(phone, str) or not phone.strip()):
            return {"success": False, "error": "phone must be a non-empty string or null."}
        if email is not None and (not isinstance(email, str) or "@" not in email):
            return {"success": False, "error": "email must be an email address or null."}
        if phone is None and email is None:
            return {"success": False, "error": "Give a phone number, an email address, or both."}
        patient = self.patients.get(patient_id)
        if patient is None:
            return {"success": False, "error": f"Patient {patient_id} not found."}
        if phone is not None:
            patient["phone"] = phone.strip()
        if email is not None:
            patient["email"] = email.strip()
        return {"success": True, "message": f"Contact details of patient {patient_id} updated."}

    def book_appointment(self, patient_id: str, slot_id: str, reason: str,
                         referral_id: Optional[str] = None) -> dict:
        """Book an open future slot for a patient. Clinicians who require a referral need the id
        of an open referral of the patient for their specialty (see list_patient_referrals).
        Appointment ids are given in order: APT-0001, APT-0002, ... (the next free number after
        the count of appointments).

        Args:
            patient_id (str): The patient's id.
            slot_id (str): The slot to book.
            reason (str): The reason for the visit.
            referral_id (Optional[str]): The referral that covers the visit, if one is needed.

        Returns:
            dict: {"success": True, "message": str, "data": {"appointment_id": str}}, or
            {"success": False, "error": str} when a rule forbids the booking.
        """
        for label, value in (("patient_id", patient_id), ("slot_id", slot_id), ("reason", reason)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        if referral_id is not None and not isinstance(referral_id, str):
            return {"success": False, "error": "referral_id must be a string or null."}
        patient = self.patients.get(patient_id)
        if patient is None:
            return {"success": False, "error": f"Patient {patient_id} not found."}
        if patient["status"] != "active":
            return {"success": False, "error": f"Patient {patient_id} is not active."}
        if patient["no_show_count"] >= self.NO_SHOW_LIMIT:
            return {"success": False, "error": f"Patient {patient_id} has {patient['no_show_count']} no-shows and cannot book."}
        slot = self.slots.get(slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        if slot["status"] != "open":
            return {"success": False, "error": f"Slot {slot_id} is {slot['status']}."}
        clinician = self.clinicians.get(slot["clinician_id"])
        if clinician is None or clinician["status"] != "active":
            return {"success": False, "error": f"The clinician of slot {slot_id} is not available."}
        try:
            start = datetime.fromisoformat(slot["start"]).replace(tzinfo=None)
            end = datetime.fromisoformat(slot["end"]).replace(tzinfo=None)
        except (TypeError, ValueError):
            return {"success": False, "error": f"Slot {slot_id} has invalid times."}
        if start <= datetime.now():
            return {"success": False, "error": f"Slot {slot_id} has already started."}
        if not clinician["accepts_new_patients"] and patient["primary_clinician_id"] != clinician["clinician_id"] \
                and not any(a["patient_id"] == patient_id and a["clinician_id"] == clinician["clinician_id"]
                            and a["status"] == "completed" for a in self.appointments.values()):
            return {"success": False, "error": f"{clinician['name']} does not accept new patients."}
        scheduled = [a for a in self.appointments.values()
                     if a["patient_id"] == patient_id and a["status"] == "scheduled"]
        if len(scheduled) >= self.MAX_SCHEDULED_PER_PATIENT:
            return {"success": False, "error": f"Patient {patient_id} already has {len(scheduled)} scheduled appointments."}
        for appointment in scheduled:
            other = self.slots.get(appointment["slot_id"])
            if other is None:
                continue
            try:
                other_start = datetime.fromisoformat(other["start"]).replace(tzinfo=None)
                other_end = datetime.fromisoformat(other["end"]).replace(tzinfo=None)
            except (TypeError, ValueError):
                continue
            if other_start < end and start < other_end:
                return {"success": False, "error": f"The slot overlaps appointment {appointment['appointment_id']}."}
        referral = None
        if referral_id is not None:
            referral = self.referrals.get(referral_id)
            if referral is None:
                return {"success": False, "error": f"Referral {referral_id} not found."}
            if referral["patient_id"] != patient_id:
                return {"success": False, "error": f"Referral {referral_id} belongs to another patient."}
            if referral["specialty"].lower() != clinician["specialty"].lower():
                return {"success": False, "error": f"Referral {referral_id} is for {referral['specialty']}, not {clinician['specialty']}."}
            if referral["status"] != "open" or referral["visits_used"] >= referral["visits_allowed"]:
                return {"success": False, "error": f"Referral {referral_id} has no visits left."}
            if referral["expiry_date"] < start.date().isoformat():
                return {"success": False, "error": f"Referral {referral_id} expires on {referral['expiry_date']}, before the slot."}
        elif clinician["requires_referral"]:
            return {"success": False, "error": f"{clinician['specialty']} appointments need a referral_id."}
        number = len(self.appointments) + 1
        while f"APT-{number:04d}" in self.appointments:
            number += 1
        appointment_id = f"APT-{number:04d}"
        self.appointments[appointment_id] = {
            "appointment_id": appointment_id, "patient_id": patient_id,
            "clinician_id": clinician["clinician_id"], "slot_id": slot_id, "reason": reason.strip(),
            "referral_id": referral_id, "status": "scheduled", "reschedule_count": 0, "notes": ""}
        slot["status"] = "booked"
        if referral is not None:
            referral["visits_used"] += 1
            if referral["visits_used"] >= referral["visits_allowed"]:
                referral["status"] = "used"
        return {"success": True, "message": f"Appointment {appointment_id} booked with {clinician['name']} at {slot['start']}.",
                "data": {"appointment_id": appointment_id}}

    def reschedule_appointment(self, appointment_id: str, new_slot_id: str) -> dict:
        """Move a scheduled appointment to another open future slot of an active clinician of the
        same specialty, freeing the old slot. At most MAX_RESCHEDULES (2) times per appointment;
        after that, cancel it and book a new one.

        Args:
            appointment_id (str): The scheduled appointment.
            new_slot_id (str): The open slot to move it to.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(appointment_id, str) or not isinstance(new_slot_id, str):
            return {"success": False, "error": "appointment_id and new_slot_id must be strings."}
        appointment = self.appointments.get(appointment_id)
        if appointment is None:
            return {"success": False, "error": f"Appointment {appointment_id} not found."}
        if appointment["status"] != "scheduled":
            return {"success": False, "error": f"Appointment {appointment_id} is {appointment['status']}, not scheduled."}
        if appointment["reschedule_count"] >= self.MAX_RESCHEDULES:
            return {"success": False, "error": f"Appointment {appointment_id} has been rescheduled {appointment['reschedule_count']} times already; cancel it and book a new one."}
        if new_slot_id == appointment["slot_id"]:
            return {"success": False, "error": "The appointment is already in that slot."}
        slot = self.slots.get(new_slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {new_slot_id} not found."}
        if slot["status"] != "open":
            return {"success": False, "error": f"Slot {new_slot_id} is {slot['status']}."}
        clinician = self.clinicians.get(slot["clinician_id"])
        current = self.clinicians.get(appointment["clinician_id"])
        if clinician is None or clinician["status"] != "active":
            return {"success": False, "error": f"The clinician of slot {new_slot_id} is not available."}
        if current is None or current["specialty"].lower() != clinician["specialty"].lower():
            return {"success": False, "error": "The new slot must be with a clinician of the same specialty."}
        patient = self.patients.get(appointment["patient_id"])
        if patient is None or patient["status"] != "active":
            return {"success": False, "error": "The patient of this appointment is not active."}
        try:
            start = datetime.fromisoformat(slot["start"]).replace(tzinfo=None)
            end = datetime.fromisoformat(slot["end"]).replace(tzinfo=None)
        except (TypeError, ValueError):
            return {"success": False, "error": f"Slot {new_slot_id} has invalid times."}
        if start <= datetime.now():
            return {"success": False, "error": f"Slot {new_slot_id} has already started."}
        if clinician["clinician_id"] != appointment["clinician_id"] and not clinician["accepts_new_patients"] \
                and patient["primary_clinician_id"] != clinician["clinician_id"] \
                and not any(a["patient_id"] == patient["patient_id"] and a["clinician_id"] == clinician["clinician_id"]
                            and a["status"] == "completed" for a in self.appointments.values()):
            return {"success": False, "error": f"{clinician['name']} does not accept new patients."}
        if clinician["requires_referral"]:
            referral = self.referrals.get(appointment["referral_id"] or "")
            if referral is None:
                return {"success": False, "error": f"{clinician['specialty']} appointments need a referral; this appointment has none."}
            if referral["expiry_date"] < start.date().isoformat():
                return {"success": False, "error": f"Referral {referral['referral_id']} expires on {referral['expiry_date']}, before the new slot."}
        for other_appointment in self.appointments.values():
            if other_appointment["patient_id"] != patient["patient_id"] or other_appointment["status"] != "scheduled" \
                    or other_appointment["appointment_id"] == appointment_id:
                continue
            other = self.slots.get(other_appointment["slot_id"])
            if other is None:
                continue
            try:
                other_start = datetime.fromisoformat(other["start"]).replace(tzinfo=None)
                other_end = datetime.fromisoformat(other["end"]).replace(tzinfo=None)
            except (TypeError, ValueError):
                continue
            if other_start < end and start < other_end:
                return {"success": False, "error": f"The new slot overlaps appointment {other_appointment['appointment_id']}."}
        old_slot = self.slots.get(appointment["slot_id"])
        if old_slot is not None and old_slot["status"] == "booked":
            old_slot["status"] = "open"
        slot["status"] = "booked"
        appointment["slot_id"] = new_slot_id
        appointment["clinician_id"] = clinician["clinician_id"]
        appointment["reschedule_count"] += 1
        return {"success": True, "message": f"Appointment {appointment_id} moved to {slot['start']} with {clinician['name']}."}

    def cancel_appointment(self, appointment_id: str, reason: str) -> dict:
        """Cancel a scheduled appointment: its slot opens again and a referral visit it used is
        given back.

        Args:
            appointment_id (str): The scheduled appointment.
            reason (str): Why it is cancelled (kept in the appointment's notes).

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(appointment_id, str) or not isinstance(reason, str):
            return {"success": False, "error": "appointment_id and reason must be strings."}
        if not reason.strip():
            return {"success": False, "error": "Give a reason for the cancellation."}
        appointment = self.appointments.get(appointment_id)
        if appointment is None:
            return {"success": False, "error": f"Appointment {appointment_id} not found."}
        if appointment["status"] != "scheduled":
            return {"success": False, "error": f"Appointment {appointment_id} is {appointment['status']}, not scheduled."}
        appointment["status"] = "cancelled"
        appointment["notes"] = reason.strip()
        slot = self.slots.get(appointment["slot_id"])
        if slot is not None and slot["status"] == "booked":
            slot["status"] = "open"
        referral = self.referrals.get(appointment["referral_id"] or "")
        if referral is not None and referral["visits_used"] > 0:
            referral["visits_used"] -= 1
            if referral["status"] == "used":
                referral["status"] = "open"
        return {"success": True, "message": f"Appointment {appointment_id} cancelled."}

    def complete_appointment(self, appointment_id: str, notes: str) -> dict:
        """Record a scheduled appointment whose start has passed as completed, with visit notes.

        Args:
            appointment_id (str): The appointment.
            notes (str): Short visit notes.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(appointment_id, str) or not isinstance(notes, str):
            return {"success": False, "error": "appointment_id and notes must be strings."}
        if not notes.strip():
            return {"success": False, "error": "Give visit notes."}
        appointment = self.appointments.get(appointment_id)
        if appointment is None:
            return {"success": False, "error": f"Appointment {appointment_id} not found."}
        if appointment["status"] != "scheduled":
            return {"success": False, "error": f"Appointment {appointment_id} is {appointment['status']}, not scheduled."}
        slot = self.slots.get(appointment["slot_id"])
        try:
            start = datetime.fromisoformat(slot["start"]).replace(tzinfo=None) if slot else None
        except (TypeError, ValueError):
            start = None
        if start is None:
            return {"success": False, "error": "The appointment's slot has no valid start time."}
        if start > datetime.now():
            return {"success": False, "error": f"Appointment {appointment_id} has not started yet ({slot['start']})."}
        appointment["status"] = "completed"
        appointment["notes"] = notes.strip()
        return {"success": True, "message": f"Appointment {appointment_id} completed."}

    def mark_no_show(self, appointment_id: str) -> dict:
        """Record that the patient did not come to a scheduled appointment whose start has
        passed; the patient's no_show_count goes up by one.

        Args:
            appointment_id (str): The appointment.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(appointment_id, str) or not appointment_id.strip():
            return {"success": False, "error": "appointment_id must be a non-empty string."}
        appointment = self.appointments.get(appointment_id)
        if appointment is None:
            return {"success": False, "error": f"Appointment {appointment_id} not found."}
        if appointment["status"] != "scheduled":
            return {"success": False, "error": f"Appointment {appointment_id} is {appointment['status']}, not scheduled."}
        slot = self.slots.get(appointment["slot_id"])
        try:
            start = datetime.fromisoformat(slot["start"]).replace(tzinfo=None) if slot else None
        except (TypeError, ValueError):
            start = None
        if start is None:
            return {"success": False, "error": "The appointment's slot has no valid start time."}
        if start > datetime.now():
            return {"success": False, "error": f"Appointment {appointment_id} has not started yet ({slot['start']})."}
        appointment["status"] = "no_show"
        patient = self.patients.get(appointment["patient_id"])
        if patient is not None:
            patient["no_show_count"] += 1
        return {"success": True, "message": f"Appointment {appointment_id} recorded as a no-show."}

    def issue_referral(self, patient_id: str, referring_clinician_id: str, specialty: str,
                       reason: str, visits_allowed: int = 1, valid_days: int = 90) -> dict:
        """Issue a referral of a patient to a specialty. Referral ids are given in order:
        REF-0001, REF-0002, ... (the next free number after the count of referrals).

        Args:
            patient_id (str): The active patient referred.
            referring_clinician_id (str): The active clinician who refers.
            specialty (str): The specialty referred to; an active clinician must offer it.
            reason (str): The clinical reason.
            visits_allowed (int): Visits covered, 1 to 6.
            valid_days (int): Days of validity from today, 1 to 180.

        Returns:
            dict: {"success": True, "message": str, "data": {"referral_id": str,
            "expiry_date": str}}, or {"success": False, "error": str}.
        """
        for label, value in (("patient_id", patient_id), ("referring_clinician_id", referring_clinician_id),
                             ("specialty", specialty), ("reason", reason)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        for label, value in (("visits_allowed", visits_allowed), ("valid_days", valid_days)):
            if isinstance(value, bool) or not isinstance(value, int):
                return {"success": False, "error": f"{label} must be an integer."}
        if not 1 <= visits_allowed <= self.MAX_REFERRAL_VISITS:
            return {"success": False, "error": f"visits_allowed must be between 1 and {self.MAX_REFERRAL_VISITS}."}
        if not 1 <= valid_days <= self.MAX_REFERRAL_DAYS:
            return {"success": False, "error": f"valid_days must be between 1 and {self.MAX_REFERRAL_DAYS}."}
        patient = self.patients.get(patient_id)
        if patient is None or patient["status"] != "active":
            return {"success": False, "error": f"Patient {patient_id} is not an active patient."}
        referrer = self.clinicians.get(referring_clinician_id)
        if referrer is None or referrer["status"] != "active":
            return {"success": False, "error": f"Clinician {referring_clinician_id} is not an active clinician."}
        offered = None
        for clinician in self.clinicians.values():
            if clinician["status"] == "active" and clinician["specialty"].lower() == specialty.strip().lower():
                offered = clinician["specialty"]
                break
        if offered is None:
            return {"success": False, "error": f"No active clinician offers {specialty}."}
        if offered.lower() == referrer["specialty"].lower():
            return {"success": False, "error": "A clinician cannot refer to their own specialty."}
        today = datetime.now().date()
        number = len(self.referrals) + 1
        while f"REF-{number:04d}" in self.referrals:
            number += 1
        referral_id = f"REF-{number:04d}"
        expiry = (today + timedelta(days=valid_days)).isoformat()
        self.referrals[referral_id] = {
            "referral_id": referral_id, "patient_id": patient_id,
            "referring_clinician_id": referring_clinician_id, "specialty": offered,
            "reason": reason.strip(), "issued_date": today.isoformat(), "expiry_date": expiry,
            "visits_allowed": visits_allowed, "visits_used": 0, "status": "open"}
        return {"success": True, "message": f"Referral {referral_id} to {offered} issued, valid until {expiry}.",
                "data": {"referral_id": referral_id, "expiry_date": expiry}}

    def set_slot_availability(self, slot_id: str, available: bool) -> dict:
        """Block an open slot (available=False) or open a blocked slot again (available=True).
        Booked slots cannot be changed: cancel or move the appointment first.

        Args:
            slot_id (str): The slot.
            available (bool): True to open the slot, False to block it.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(slot_id, str) or not slot_id.strip():
            return {"success": False, "error": "slot_id must be a non-empty string."}
        if not isinstance(available, bool):
            return {"success": False, "error": "available must be a boolean."}
        slot = self.slots.get(slot_id)
        if slot is None:
            return {"success": False, "error": f"Slot {slot_id} not found."}
        if slot["status"] == "booked":
            return {"success": False, "error": f"Slot {slot_id} is booked; cancel or move its appointment first."}
        target = "open" if available else "blocked"
        if slot["status"] == target:
            return {"success": False, "error": f"Slot {slot_id} is already {target}."}
        slot["status"] = target
        return {"success": True, "message": f"Slot {slot_id} is now {target}."}
