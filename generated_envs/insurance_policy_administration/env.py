from datetime import date, datetime, timedelta
from typing import Dict, Optional, TypedDict


class PolicyholderInfo(TypedDict):
    holder_id: str
    name: str
    email: str
    phone: str
    date_of_birth: str  # ISO 8601 date
    status: str  # "active" | "suspended"


class PolicyInfo(TypedDict):
    policy_id: str
    holder_id: str
    product: str  # "auto" | "home" | "renters" | "travel"
    status: str  # "active" | "lapsed" | "expired" | "cancelled"
    start_date: str  # ISO 8601 date, first day of the current term
    end_date: str  # ISO 8601 date, last day of the current term
    annual_premium: float
    coverage_limit: float  # most the insurer pays on claims in one term
    deductible: float  # borne by the policyholder on every claim
    balance_due: float  # premium billed and not yet paid
    claims_paid: float  # paid out on claims in the current term
    renewal_count: int
    cancellation_reason: Optional[str]


class EndorsementInfo(TypedDict):
    endorsement_id: str
    policy_id: str
    description: str
    premium_change: float  # change to the annual premium (negative for a reduction)
    limit_change: float  # change to the coverage limit (negative for a reduction)
    effective_date: str  # ISO 8601 date
    created_date: str  # ISO 8601 date


class ClaimInfo(TypedDict):
    claim_id: str
    policy_id: str
    incident_date: str  # ISO 8601 date
    filed_date: str  # ISO 8601 date
    description: str
    claimed_amount: float
    approved_amount: float  # 0.0 until the claim is approved
    adjuster: Optional[str]
    status: str  # "submitted" | "under_review" | "approved" | "denied" | "paid"
    decision_note: Optional[str]
    paid_date: Optional[str]  # ISO 8601 date


class PaymentInfo(TypedDict):
    payment_id: str
    policy_id: str
    amount: float
    method: str  # "card" | "bank_transfer" | "check"
    paid_date: str  # ISO 8601 date


class InsurancePolicyAdministration:
    PRODUCTS = ("auto", "home", "renters", "travel")
    POLICY_STATUSES = ("active", "lapsed", "expired", "cancelled")
    CLAIM_STATUSES = ("submitted", "under_review", "approved", "denied", "paid")
    OPEN_CLAIM_STATUSES = ("submitted", "under_review", "approved")
    PAYMENT_METHODS = ("card", "bank_transfer", "check")
    MIN_ANNUAL_PREMIUM = 100.0
    MAX_ENDORSEMENTS_PER_POLICY = 5
    RENEWAL_WINDOW_DAYS = 60
    RENEWAL_GRACE_DAYS = 30
    TERM_DAYS = 365
    CLAIMS_SURCHARGE = 0.10
    NO_CLAIMS_DISCOUNT = 0.05

    def __init__(self, init_config: dict):
        # Policyholders (customers), by holder_id.
        self.policyholders: Dict[str, PolicyholderInfo] = {}
        # Policies, by policy_id.
        self.policies: Dict[str, PolicyInfo] = {}
        # Endorsements (mid-term changes to a policy), by endorsement_id.
        self.endorsements: Dict[str, EndorsementInfo] = {}
        # Claims filed against policies, by claim_id.
        self.claims: Dict[str, ClaimInfo] = {}
        # Premium payments received, by payment_id.
        self.payments: Dict[str, PaymentInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - Every policy belongs to an existing policyholder; endorsements, claims and payments
        #   refer to an existing policy.
        # - A suspended policyholder cannot file claims, add endorsements or renew policies.
        # - Claims can be filed only on an active policy, for an incident inside the current term
        #   and not in the future, for a positive amount no larger than the coverage limit.
        # - Claim workflow: submitted -> under_review -> approved | denied; approved -> paid.
        #   A submitted claim may also be denied directly. Denied and paid claims are final.
        # - An approved amount is positive, at most the claimed amount minus the deductible, and
        #   at most the remaining coverage (limit - claims paid - approved but unpaid claims).
        # - Paying a claim adds its approved amount to the policy's claims_paid.
        # - Endorsements apply only to active policies, take effect inside the term and not in the
        #   past, keep the annual premium >= MIN_ANNUAL_PREMIUM and the coverage limit above what
        #   claims have already used; at most MAX_ENDORSEMENTS_PER_POLICY per policy. The premium
        #   change is billed to (or credited against) the balance due.
        # - A premium payment is positive and at most the balance due; cancelled policies take no
        #   payments. A lapsed policy whose balance is paid in full, within its term, is active
        #   again.
        # - Renewal: only active or expired policies with no balance due and no open claims
        #   (submitted, under_review, approved), whose term ends within RENEWAL_WINDOW_DAYS or
        #   ended at most RENEWAL_GRACE_DAYS ago. The new term starts the day after the old one
        #   ends and lasts TERM_DAYS; the premium rises by CLAIMS_SURCHARGE if claims were paid in
        #   the term, else falls by NO_CLAIMS_DISCOUNT, and is billed to the balance due.
        # - Only active or lapsed policies without open claims can be cancelled.

    def get_policyholder(self, holder_id: str) -> dict:
        """Get a policyholder's record by id.

        Args:
            holder_id (str): The policyholder id, e.g. "PH-101".

        Returns:
            dict: {"success": True, "data": PolicyholderInfo}, or {"success": False, "error": str}.
        """
        if not isinstance(holder_id, str) or not holder_id.strip():
            return {"success": False, "error": "holder_id must be a non-empty string."}
        holder = self.policyholders.get(holder_id)
        if holder is None:
            return {"success": False, "error": f"Policyholder {holder_id} not found."}
        return {"success": True, "data": dict(holder)}

    def find_policyholders(self, query: str) -> dict:
        """Find policyholders whose name, email or phone contains the given text (case-insensitive).

        Args:
            query (str): Text to look for, e.g. a surname or part of a phone number.

        Returns:
            dict: {"success": True, "data": List[PolicyholderInfo]} sorted by holder_id (possibly
            empty), or {"success": False, "error": str}.
        """
        if not isinstance(query, str) or not query.strip():
            return {"success": False, "error": "query must be a non-empty string."}
        needle = query.strip().lower()
        found = [dict(holder) for holder in self.policyholders.values()
                 if needle in str(holder.get("name", "")).lower()
                 or needle in str(holder.get("email", "")).lower()
                 or needle in str(holder.get("phone", "")).lower()]
        found.sort(key=lambda holder: str(holder.get("holder_id", "")))
        return {"success": True, "data": found}

    def get_policy(self, policy_id: str) -> dict:
        """Get a policy by id, with the number of its open claims and endorsements.

        Args:
            policy_id (str): The policy id, e.g. "POL-2001".

        Returns:
            dict: {"success": True, "data": PolicyInfo plus "open_claims" (int) and
            "endorsement_count" (int)}, or {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        data = dict(policy)
        data["open_claims"] = sum(1 for claim in self.claims.values()
                                  if claim.get("policy_id") == policy_id
                                  and claim.get("status") in ("submitted", "under_review", "approved"))
        data["endorsement_count"] = sum(1 for endorsement in self.endorsements.values()
                                        if endorsement.get("policy_id") == policy_id)
        return {"success": True, "data": data}

    def list_policies(self, holder_id: Optional[str] = None, status: Optional[str] = None,
                      product: Optional[str] = None) -> dict:
        """List policies, optionally filtered by policyholder, status and product.

        Args:
            holder_id (Optional[str]): Only policies of this policyholder.
            status (Optional[str]): Only policies in this status: "active", "lapsed", "expired" or
                "cancelled".
            product (Optional[str]): Only policies of this product: "auto", "home", "renters" or
                "travel".

        Returns:
            dict: {"success": True, "data": List[PolicyInfo]} sorted by policy_id, or
            {"success": False, "error": str}.
        """
        for label, value in (("holder_id", holder_id), ("status", status), ("product", product)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in self.POLICY_STATUSES:
            return {"success": False, "error": f"Unknown status {status!r}; use one of "
                                               f"{', '.join(self.POLICY_STATUSES)}."}
        if product is not None and product not in self.PRODUCTS:
            return {"success": False, "error": f"Unknown product {product!r}; use one of "
                                               f"{', '.join(self.PRODUCTS)}."}
        if holder_id is not None and holder_id not in self.policyholders:
            return {"success": False, "error": f"Policyholder {holder_id} not found."}
        found = [dict(policy) for policy in self.policies.values()
                 if (holder_id is None or policy.get("holder_id") == holder_id)
                 and (status is None or policy.get("status") == status)
                 and (product is None or policy.get("product") == product)]
        found.sort(key=lambda policy: str(policy.get("policy_id", "")))
        return {"success": True, "data": found}

    def get_remaining_coverage(self, policy_id: str) -> dict:
        """Report how much of a policy's coverage limit is still available in the current term.

        Remaining coverage = coverage limit - claims paid this term - approved but unpaid claims.

        Args:
            policy_id (str): The policy id.

        Returns:
            dict: {"success": True, "data": {"policy_id", "coverage_limit", "claims_paid",
            "approved_unpaid", "remaining_coverage", "deductible"}}, or {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        approved = sum(float(claim.get("approved_amount", 0.0)) for claim in self.claims.values()
                       if claim.get("policy_id") == policy_id and claim.get("status") == "approved")
        limit = float(policy.get("coverage_limit", 0.0))
        paid = float(policy.get("claims_paid", 0.0))
        return {"success": True, "data": {
            "policy_id": policy_id, "coverage_limit": round(limit, 2), "claims_paid": round(paid, 2),
            "approved_unpaid": round(approved, 2),
            "remaining_coverage": round(max(0.0, limit - paid - approved), 2),
            "deductible": round(float(policy.get("deductible", 0.0)), 2)}}

    def get_claim(self, claim_id: str) -> dict:
        """Get a claim by id.

        Args:
            claim_id (str): The claim id, e.g. "CLM-0003".

        Returns:
            dict: {"success": True, "data": ClaimInfo}, or {"success": False, "error": str}.
        """
        if not isinstance(claim_id, str) or not claim_id.strip():
            return {"success": False, "error": "claim_id must be a non-empty string."}
        claim = self.claims.get(claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found."}
        return {"success": True, "data": dict(claim)}

    def list_claims(self, policy_id: Optional[str] = None, holder_id: Optional[str] = None,
                    status: Optional[str] = None) -> dict:
        """List claims, optionally only those of a policy or of a policyholder, or in a status.

        Args:
            policy_id (Optional[str]): Only claims on this policy.
            holder_id (Optional[str]): Only claims on policies of this policyholder.
            status (Optional[str]): Only claims in this status: "submitted", "under_review",
                "approved", "denied" or "paid".

        Returns:
            dict: {"success": True, "data": List[ClaimInfo]} sorted by claim_id, or
            {"success": False, "error": str}.
        """
        for label, value in (("policy_id", policy_id), ("holder_id", holder_id), ("status", status)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in self.CLAIM_STATUSES:
            return {"success": False, "error": f"Unknown claim status {status!r}; use one of "
                                               f"{', '.join(self.CLAIM_STATUSES)}."}
        if policy_id is not None and policy_id not in self.policies:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        if holder_id is not None and holder_id not in self.policyholders:
            return {"success": False, "error": f"Policyholder {holder_id} not found."}
        found = []
        for claim in self.claims.values():
            policy = self.policies.get(claim.get("policy_id"), {})
            if policy_id is not None and claim.get("policy_id") != policy_id:
                continue
            if holder_id is not None and policy.get("holder_id") != holder_id:
                continue
            if status is not None and claim.get("status") != status:
                continue
            found.append(dict(claim))
        found.sort(key=lambda claim: str(claim.get("claim_id", "")))
        return {"success": True, "data": found}

    def list_endorsements(self, policy_id: str) -> dict:
        """List the endorsements of a policy, oldest first.

        Args:
            policy_id (str): The policy id.

        Returns:
            dict: {"success": True, "data": List[EndorsementInfo]}, or {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        if policy_id not in self.policies:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        found = [dict(endorsement) for endorsement in self.endorsements.values()
                 if endorsement.get("policy_id") == policy_id]
        found.sort(key=lambda e: (str(e.get("created_date", "")), str(e.get("endorsement_id", ""))))
        return {"success": True, "data": found}

    def list_payments(self, policy_id: str) -> dict:
        """List the premium payments received for a policy, oldest first, with their total.

        Args:
            policy_id (str): The policy id.

        Returns:
            dict: {"success": True, "data": {"payments": List[PaymentInfo], "total_paid": float,
            "balance_due": float}}, or {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        found = [dict(payment) for payment in self.payments.values()
                 if payment.get("policy_id") == policy_id]
        found.sort(key=lambda p: (str(p.get("paid_date", "")), str(p.get("payment_id", ""))))
        total = sum(float(payment.get("amount", 0.0)) for payment in found)
        return {"success": True, "data": {"payments": found, "total_paid": round(total, 2),
                                          "balance_due": round(float(policy.get("balance_due", 0.0)), 2)}}

    def list_renewal_candidates(self, within_days: int = 60) -> dict:
        """List active or expired policies whose term ends within the given number of days (or
        ended at most 30 days ago), soonest first, with what stands in the way of renewing them.

        Args:
            within_days (int): How many days ahead to look (1 to 365).

        Returns:
            dict: {"success": True, "data": List[{"policy_id", "holder_id", "product", "status",
            "end_date", "days_to_end", "balance_due", "open_claims"}]}, or
            {"success": False, "error": str}.
        """
        if not isinstance(within_days, int) or isinstance(within_days, bool):
            return {"success": False, "error": "within_days must be an integer."}
        if within_days < 1 or within_days > 365:
            return {"success": False, "error": "within_days must be between 1 and 365."}
        today = datetime.now().date()
        found = []
        for policy in self.policies.values():
            if policy.get("status") not in ("active", "expired"):
                continue
            try:
                end = date.fromisoformat(str(policy.get("end_date", "")))
            except ValueError:
                continue
            days = (end - today).days
            if days > within_days or days < -self.RENEWAL_GRACE_DAYS:
                continue
            open_claims = sum(1 for claim in self.claims.values()
                              if claim.get("policy_id") == policy.get("policy_id")
                              and claim.get("status") in self.OPEN_CLAIM_STATUSES)
            found.append({"policy_id": policy.get("policy_id"), "holder_id": policy.get("holder_id"),
                          "product": policy.get("product"), "status": policy.get("status"),
                          "end_date": policy.get("end_date"), "days_to_end": days,
                          "balance_due": round(float(policy.get("balance_due", 0.0)), 2),
                          "open_claims": open_claims})
        found.sort(key=lambda entry: (entry["days_to_end"], str(entry["policy_id"])))
        return {"success": True, "data": found}

    def get_renewal_quote(self, policy_id: str) -> dict:
        """Quote the renewal of a policy: whether it can be renewed now, the next term and the
        renewal premium (10% claims surcharge if claims were paid this term, else 5% no-claims
        discount).

        Args:
            policy_id (str): The policy id.

        Returns:
            dict: {"success": True, "data": {"policy_id", "eligible" (bool), "reasons" (List[str]),
            "new_start_date", "new_end_date", "current_premium", "renewal_premium"}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        try:
            end = date.fromisoformat(str(policy.get("end_date", "")))
        except ValueError:
            return {"success": False, "error": f"Policy {policy_id} has an invalid end date."}
        today = datetime.now().date()
        reasons = []
        if policy.get("status") not in ("active", "expired"):
            reasons.append(f"the policy is {policy.get('status')}")
        holder = self.policyholders.get(policy.get("holder_id"), {})
        if holder.get("status") != "active":
            reasons.append("the policyholder is not active")
        if float(policy.get("balance_due", 0.0)) > 0.005:
            reasons.append(f"a balance of {float(policy.get('balance_due', 0.0)):.2f} is due")
        open_claims = [claim.get("claim_id") for claim in self.claims.values()
                       if claim.get("policy_id") == policy_id
                       and claim.get("status") in self.OPEN_CLAIM_STATUSES]
        if open_claims:
            reasons.append(f"open claims: {', '.join(sorted(str(c) for c in open_claims))}")
        days = (end - today).days
        if days > self.RENEWAL_WINDOW_DAYS:
            reasons.append(f"the term ends in {days} days; renewal opens {self.RENEWAL_WINDOW_DAYS} "
                           "days before the end")
        if days < -self.RENEWAL_GRACE_DAYS:
            reasons.append(f"the term ended {-days} days ago, beyond the {self.RENEWAL_GRACE_DAYS}-day "
                           "grace period")
        premium = float(policy.get("annual_premium", 0.0))
        factor = 1 + self.CLAIMS_SURCHARGE if float(policy.get("claims_paid", 0.0)) > 0 \
            else 1 - self.NO_CLAIMS_DISCOUNT
        new_start = end + timedelta(days=1)
        new_end = end + timedelta(days=self.TERM_DAYS)
        return {"success": True, "data": {
            "policy_id": policy_id, "eligible": not reasons, "reasons": reasons,
            "new_start_date": new_start.isoformat(), "new_end_date": new_end.isoformat(),
            "current_premium": round(premium, 2), "renewal_premium": round(premium * factor, 2)}}

    def get_holder_account_summary(self, holder_id: str) -> dict:
        """Summarise a policyholder's account: their policies, total balance due, open claims and
        what has been paid out on their claims.

        Args:
            holder_id (str): The policyholder id.

        Returns:
            dict: {"success": True, "data": {"holder_id", "name", "status", "policies":
            List[{"policy_id", "product", "status", "end_date", "balance_due"}],
            "total_balance_due", "open_claims": List[str], "total_paid_on_claims"}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(holder_id, str) or not holder_id.strip():
            return {"success": False, "error": "holder_id must be a non-empty string."}
        holder = self.policyholders.get(holder_id)
        if holder is None:
            return {"success": False, "error": f"Policyholder {holder_id} not found."}
        policies = sorted((policy for policy in self.policies.values()
                           if policy.get("holder_id") == holder_id),
                          key=lambda policy: str(policy.get("policy_id", "")))
        policy_ids = {policy.get("policy_id") for policy in policies}
        open_claims = sorted(str(claim.get("claim_id")) for claim in self.claims.values()
                             if claim.get("policy_id") in policy_ids
                             and claim.get("status") in self.OPEN_CLAIM_STATUSES)
        paid = sum(float(claim.get("approved_amount", 0.0)) for claim in self.claims.values()
                   if claim.get("policy_id") in policy_ids and claim.get("status") == "paid")
        return {"success": True, "data": {
            "holder_id": holder_id, "name": holder.get("name"), "status": holder.get("status"),
            "policies": [{"policy_id": policy.get("policy_id"), "product": policy.get("product"),
                          "status": policy.get("status"), "end_date": policy.get("end_date"),
                          "balance_due": round(float(policy.get("balance_due", 0.0)), 2)}
                         for policy in policies],
            "total_balance_due": round(sum(float(policy.get("balance_due", 0.0))
                                           for policy in policies), 2),
            "open_claims": open_claims, "total_paid_on_claims": round(paid, 2)}}

    def update_policyholder_contact(self, holder_id: str, email: Optional[str] = None,
                                    phone: Optional[str] = None) -> dict:
        """Change a policyholder's email address and/or phone number.

        Args:
            holder_id (str): The policyholder id.
            email (Optional[str]): The new email address (must contain "@" and a dot after it).
            phone (Optional[str]): The new phone number (at least 7 digits).

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(holder_id, str) or not holder_id.strip():
            return {"success": False, "error": "holder_id must be a non-empty string."}
        if email is not None and not isinstance(email, str):
            return {"success": False, "error": "email must be a string or null."}
        if phone is not None and not isinstance(phone, str):
            return {"success": False, "error": "phone must be a string or null."}
        holder = self.policyholders.get(holder_id)
        if holder is None:
            return {"success": False, "error": f"Policyholder {holder_id} not found."}
        if email is None and phone is None:
            return {"success": False, "error": "Give a new email, a new phone number, or both."}
        if email is not None:
            email = email.strip()
            at = email.find("@")
            if at < 1 or "." not in email[at + 1:] or " " in email:
                return {"success": False, "error": f"{email!r} is not a valid email address."}
        if phone is not None:
            phone = phone.strip()
            if sum(ch.isdigit() for ch in phone) < 7:
                return {"success": False, "error": f"{phone!r} is not a valid phone number."}
        changed = []
        if email is not None:
            holder["email"] = email
            changed.append("email")
        if phone is not None:
            holder["phone"] = phone
            changed.append("phone")
        return {"success": True, "message": f"Updated {' and '.join(changed)} of {holder_id}."}

    def add_endorsement(self, policy_id: str, description: str, premium_change: float,
                        limit_change: float, effective_date: str) -> dict:
        """Add an endorsement (a mid-term change) to an active policy and apply it at once.

        The annual premium and the coverage limit change by the given amounts; the premium change is
        billed to the balance due (a reduction is credited, never below zero).

        Args:
            policy_id (str): The policy to change.
            description (str): What the endorsement does, e.g. "Add named driver Sam Ortiz".
            premium_change (float): Change to the annual premium (negative for a reduction).
            limit_change (float): Change to the coverage limit (negative for a reduction).
            effective_date (str): ISO date the change takes effect, inside the current term and not
                in the past.

        Returns:
            dict: {"success": True, "message": str, "data": EndorsementInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        if not isinstance(description, str) or not description.strip():
            return {"success": False, "error": "description must be a non-empty string."}
        for label, value in (("premium_change", premium_change), ("limit_change", limit_change)):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                return {"success": False, "error": f"{label} must be a number."}
        if not isinstance(effective_date, str):
            return {"success": False, "error": "effective_date must be an ISO date string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        if policy.get("status") != "active":
            return {"success": False, "error": f"Policy {policy_id} is {policy.get('status')}; only "
                                               "active policies can be endorsed."}
        holder = self.policyholders.get(policy.get("holder_id"), {})
        if holder.get("status") != "active":
            return {"success": False, "error": "The policyholder is suspended."}
        if premium_change == 0 and limit_change == 0:
            return {"success": False, "error": "An endorsement must change the premium or the limit."}
        try:
            effective = date.fromisoformat(effective_date)
            start = date.fromisoformat(str(policy.get("start_date", "")))
            end = date.fromisoformat(str(policy.get("end_date", "")))
        except ValueError:
            return {"success": False, "error": f"{effective_date!r} is not an ISO date (YYYY-MM-DD)."}
        today = datetime.now().date()
        if effective < today:
            return {"success": False, "error": "An endorsement cannot take effect in the past."}
        if effective < start or effective > end:
            return {"success": False, "error": f"The effective date must fall inside the current "
                                               f"term {start.isoformat()} to {end.isoformat()}."}
        count = sum(1 for e in self.endorsements.values() if e.get("policy_id") == policy_id)
        if count >= self.MAX_ENDORSEMENTS_PER_POLICY:
            return {"success": False, "error": f"Policy {policy_id} already has "
                                               f"{self.MAX_ENDORSEMENTS_PER_POLICY} endorsements."}
        new_premium = round(float(policy.get("annual_premium", 0.0)) + float(premium_change), 2)
        if new_premium < self.MIN_ANNUAL_PREMIUM:
            return {"success": False, "error": f"The annual premium would fall to {new_premium:.2f}, "
                                               f"below the minimum of {self.MIN_ANNUAL_PREMIUM:.2f}."}
        approved = sum(float(c.get("approved_amount", 0.0)) for c in self.claims.values()
                       if c.get("policy_id") == policy_id and c.get("status") == "approved")
        used = float(policy.get("claims_paid", 0.0)) + approved
        new_limit = round(float(policy.get("coverage_limit", 0.0)) + float(limit_change), 2)
        if new_limit <= 0 or new_limit < used:
            return {"success": False, "error": f"The coverage limit would fall to {new_limit:.2f}, "
                                               f"below what claims already use ({used:.2f})."}
        number = len(self.endorsements) + 1
        endorsement_id = f"END-{number:04d}"
        while endorsement_id in self.endorsements:
            number += 1
            endorsement_id = f"END-{number:04d}"
        record = {"endorsement_id": endorsement_id, "policy_id": policy_id,
                  "description": description.strip(), "premium_change": round(float(premium_change), 2),
                  "limit_change": round(float(limit_change), 2),
                  "effective_date": effective.isoformat(), "created_date": today.isoformat()}
        self.endorsements[endorsement_id] = record
        policy["annual_premium"] = new_premium
        policy["coverage_limit"] = new_limit
        policy["balance_due"] = round(max(0.0, float(policy.get("balance_due", 0.0))
                                          + float(premium_change)), 2)
        return {"success": True, "message": f"Endorsement {endorsement_id} applied to {policy_id}: "
                                            f"premium {new_premium:.2f}, limit {new_limit:.2f}.",
                "data": dict(record)}

    def file_claim(self, policy_id: str, incident_date: str, claimed_amount: float,
                   description: str) -> dict:
        """File a new claim on an active policy; it starts in status "submitted".

        Args:
            policy_id (str): The policy the claim is made on.
            incident_date (str): ISO date of the incident, inside the current term and not in the
                future.
            claimed_amount (float): The amount claimed, positive and at most the coverage limit.
            description (str): What happened.

        Returns:
            dict: {"success": True, "message": str, "data": ClaimInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        if not isinstance(incident_date, str):
            return {"success": False, "error": "incident_date must be an ISO date string."}
        if not isinstance(claimed_amount, (int, float)) or isinstance(claimed_amount, bool):
            return {"success": False, "error": "claimed_amount must be a number."}
        if not isinstance(description, str) or not description.strip():
            return {"success": False, "error": "description must be a non-empty string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        if policy.get("status") != "active":
            return {"success": False, "error": f"Policy {policy_id} is {policy.get('status')}; claims "
                                               "can only be filed on active policies."}
        holder = self.policyholders.get(policy.get("holder_id"), {})
        if holder.get("status") != "active":
            return {"success": False, "error": "The policyholder is suspended and cannot file claims."}
        if claimed_amount <= 0:
            return {"success": False, "error": "claimed_amount must be positive."}
        if claimed_amount > float(policy.get("coverage_limit", 0.0)):
            return {"success": False, "error": "The claimed amount exceeds the policy's coverage "
                                               f"limit of {float(policy.get('coverage_limit', 0.0)):.2f}."}
        try:
            incident = date.fromisoformat(incident_date)
            start = date.fromisoformat(str(policy.get("start_date", "")))
            end = date.fromisoformat(str(policy.get("end_date", "")))
        except ValueError:
            return {"success": False, "error": f"{incident_date!r} is not an ISO date (YYYY-MM-DD)."}
        today = datetime.now().date()
        if incident > today:
            return {"success": False, "error": "The incident date is in the future."}
        if incident < start or incident > end:
            return {"success": False, "error": f"The incident date is outside the policy term "
                                               f"{start.isoformat()} to {end.isoformat()}."}
        number = len(self.claims) + 1
        claim_id = f"CLM-{number:04d}"
        while claim_id in self.claims:
            number += 1
            claim_id = f"CLM-{number:04d}"
        record = {"claim_id": claim_id, "policy_id": policy_id, "incident_date": incident.isoformat(),
                  "filed_date": today.isoformat(), "description": description.strip(),
                  "claimed_amount": round(float(claimed_amount), 2), "approved_amount": 0.0,
                  "adjuster": None, "status": "submitted", "decision_note": None, "paid_date": None}
        self.claims[claim_id] = record
        return {"success": True, "message": f"Claim {claim_id} filed on {policy_id}.",
                "data": dict(record)}

    def start_claim_review(self, claim_id: str, adjuster: str) -> dict:
        """Assign an adjuster to a submitted claim and move it to "under_review".

        Args:
            claim_id (str): The claim id.
            adjuster (str): Name of the adjuster who reviews the claim.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(claim_id, str) or not claim_id.strip():
            return {"success": False, "error": "claim_id must be a non-empty string."}
        if not isinstance(adjuster, str) or not adjuster.strip():
            return {"success": False, "error": "adjuster must be a non-empty string."}
        claim = self.claims.get(claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found."}
        if claim.get("status") != "submitted":
            return {"success": False, "error": f"Claim {claim_id} is {claim.get('status')}; only "
                                               "submitted claims can be put under review."}
        claim["status"] = "under_review"
        claim["adjuster"] = adjuster.strip()
        return {"success": True, "message": f"Claim {claim_id} is under review by {adjuster.strip()}."}

    def approve_claim(self, claim_id: str, approved_amount: float, note: Optional[str] = None) -> dict:
        """Approve a claim under review for a given amount.

        The amount must be positive, at most the claimed amount minus the policy's deductible, and
        at most the policy's remaining coverage.

        Args:
            claim_id (str): The claim id.
            approved_amount (float): The amount the insurer will pay.
            note (Optional[str]): A decision note for the file.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(claim_id, str) or not claim_id.strip():
            return {"success": False, "error": "claim_id must be a non-empty string."}
        if not isinstance(approved_amount, (int, float)) or isinstance(approved_amount, bool):
            return {"success": False, "error": "approved_amount must be a number."}
        if note is not None and not isinstance(note, str):
            return {"success": False, "error": "note must be a string or null."}
        claim = self.claims.get(claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found."}
        if claim.get("status") != "under_review":
            return {"success": False, "error": f"Claim {claim_id} is {claim.get('status')}; only "
                                               "claims under review can be approved."}
        policy = self.policies.get(claim.get("policy_id"))
        if policy is None:
            return {"success": False, "error": "The claim's policy no longer exists."}
        if approved_amount <= 0:
            return {"success": False, "error": "approved_amount must be positive."}
        ceiling = round(float(claim.get("claimed_amount", 0.0)) - float(policy.get("deductible", 0.0)), 2)
        if ceiling <= 0:
            return {"success": False, "error": "The claimed amount does not exceed the deductible; "
                                               "the claim can only be denied."}
        if approved_amount > ceiling + 0.005:
            return {"success": False, "error": f"At most {ceiling:.2f} (claimed amount minus the "
                                               "deductible) can be approved."}
        approved = sum(float(c.get("approved_amount", 0.0)) for c in self.claims.values()
                       if c.get("policy_id") == claim.get("policy_id") and c.get("status") == "approved")
        remaining = round(float(policy.get("coverage_limit", 0.0)) - float(policy.get("claims_paid", 0.0))
                          - approved, 2)
        if approved_amount > remaining + 0.005:
            return {"success": False, "error": f"Only {max(0.0, remaining):.2f} of coverage remains on "
                                               f"policy {claim.get('policy_id')} this term."}
        claim["status"] = "approved"
        claim["approved_amount"] = round(float(approved_amount), 2)
        claim["decision_note"] = note.strip() if isinstance(note, str) and note.strip() else None
        return {"success": True, "message": f"Claim {claim_id} approved for "
                                            f"{float(approved_amount):.2f}."}

    def deny_claim(self, claim_id: str, reason: str) -> dict:
        """Deny a submitted claim or a claim under review, with the reason.

        Args:
            claim_id (str): The claim id.
            reason (str): Why the claim is denied; kept as the decision note.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(claim_id, str) or not claim_id.strip():
            return {"success": False, "error": "claim_id must be a non-empty string."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        claim = self.claims.get(claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found."}
        if claim.get("status") not in ("submitted", "under_review"):
            return {"success": False, "error": f"Claim {claim_id} is {claim.get('status')}; only "
                                               "submitted claims or claims under review can be denied."}
        claim["status"] = "denied"
        claim["approved_amount"] = 0.0
        claim["decision_note"] = reason.strip()
        return {"success": True, "message": f"Claim {claim_id} denied."}

    def pay_claim(self, claim_id: str) -> dict:
        """Pay out an approved claim: it becomes "paid" today and its amount counts against the
        policy's coverage for the term.

        Args:
            claim_id (str): The claim id.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(claim_id, str) or not claim_id.strip():
            return {"success": False, "error": "claim_id must be a non-empty string."}
        claim = self.claims.get(claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found."}
        if claim.get("status") != "approved":
            return {"success": False, "error": f"Claim {claim_id} is {claim.get('status')}; only "
                                               "approved claims can be paid."}
        policy = self.policies.get(claim.get("policy_id"))
        if policy is None:
            return {"success": False, "error": "The claim's policy no longer exists."}
        amount = float(claim.get("approved_amount", 0.0))
        claim["status"] = "paid"
        claim["paid_date"] = datetime.now().date().isoformat()
        policy["claims_paid"] = round(float(policy.get("claims_paid", 0.0)) + amount, 2)
        return {"success": True, "message": f"Paid {amount:.2f} on claim {claim_id}."}

    def record_premium_payment(self, policy_id: str, amount: float, method: str) -> dict:
        """Record a premium payment against a policy's balance due.

        A lapsed policy whose balance is paid in full while its term is still running is
        reinstated (active again).

        Args:
            policy_id (str): The policy id.
            amount (float): The amount paid, positive and at most the balance due.
            method (str): "card", "bank_transfer" or "check".

        Returns:
            dict: {"success": True, "message": str, "data": PaymentInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        if not isinstance(amount, (int, float)) or isinstance(amount, bool):
            return {"success": False, "error": "amount must be a number."}
        if not isinstance(method, str):
            return {"success": False, "error": "method must be a string."}
        if method not in self.PAYMENT_METHODS:
            return {"success": False, "error": f"Unknown payment method {method!r}; use one of "
                                               f"{', '.join(self.PAYMENT_METHODS)}."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        if policy.get("status") == "cancelled":
            return {"success": False, "error": f"Policy {policy_id} is cancelled and takes no payments."}
        balance = round(float(policy.get("balance_due", 0.0)), 2)
        if balance <= 0:
            return {"success": False, "error": f"Policy {policy_id} has no balance due."}
        if amount <= 0:
            return {"success": False, "error": "amount must be positive."}
        if amount > balance + 0.005:
            return {"success": False, "error": f"The payment exceeds the balance due of {balance:.2f}."}
        today = datetime.now().date()
        number = len(self.payments) + 1
        payment_id = f"PAY-{number:04d}"
        while payment_id in self.payments:
            number += 1
            payment_id = f"PAY-{number:04d}"
        record = {"payment_id": payment_id, "policy_id": policy_id, "amount": round(float(amount), 2),
                  "method": method, "paid_date": today.isoformat()}
        self.payments[payment_id] = record
        policy["balance_due"] = round(max(0.0, balance - float(amount)), 2)
        message = f"Payment {payment_id} of {float(amount):.2f} recorded on {policy_id}."
        if policy.get("status") == "lapsed" and policy["balance_due"] == 0:
            try:
                end = date.fromisoformat(str(policy.get("end_date", "")))
            except ValueError:
                end = today
            if end >= today:
                policy["status"] = "active"
                message += " The policy is reinstated."
        return {"success": True, "message": message, "data": dict(record)}

    def renew_policy(self, policy_id: str) -> dict:
        """Renew a policy for the next 365-day term.

        Allowed for active or expired policies of an active policyholder with no balance due and no
        open claims, whose term ends within 60 days or ended at most 30 days ago. The renewal premium
        is 10% higher if claims were paid this term, otherwise 5% lower; it is billed to the balance
        due, and the term's claims_paid starts again at zero.

        Args:
            policy_id (str): The policy id.

        Returns:
            dict: {"success": True, "message": str, "data": PolicyInfo}, or
            {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        if policy.get("status") not in ("active", "expired"):
            return {"success": False, "error": f"Policy {policy_id} is {policy.get('status')} and "
                                               "cannot be renewed."}
        holder = self.policyholders.get(policy.get("holder_id"), {})
        if holder.get("status") != "active":
            return {"success": False, "error": "The policyholder is suspended."}
        if float(policy.get("balance_due", 0.0)) > 0.005:
            return {"success": False, "error": f"A balance of {float(policy.get('balance_due', 0.0)):.2f} "
                                               "must be paid before renewal."}
        open_claims = sorted(str(c.get("claim_id")) for c in self.claims.values()
                             if c.get("policy_id") == policy_id
                             and c.get("status") in self.OPEN_CLAIM_STATUSES)
        if open_claims:
            return {"success": False, "error": f"Open claims must be settled first: "
                                               f"{', '.join(open_claims)}."}
        try:
            end = date.fromisoformat(str(policy.get("end_date", "")))
        except ValueError:
            return {"success": False, "error": f"Policy {policy_id} has an invalid end date."}
        days = (end - datetime.now().date()).days
        if days > self.RENEWAL_WINDOW_DAYS:
            return {"success": False, "error": f"The term ends in {days} days; renewal opens "
                                               f"{self.RENEWAL_WINDOW_DAYS} days before the end."}
        if days < -self.RENEWAL_GRACE_DAYS:
            return {"success": False, "error": f"The term ended {-days} days ago, beyond the "
                                               f"{self.RENEWAL_GRACE_DAYS}-day grace period."}
        premium = float(policy.get("annual_premium", 0.0))
        factor = 1 + self.CLAIMS_SURCHARGE if float(policy.get("claims_paid", 0.0)) > 0 \
            else 1 - self.NO_CLAIMS_DISCOUNT
        new_premium = round(premium * factor, 2)
        policy["start_date"] = (end + timedelta(days=1)).isoformat()
        policy["end_date"] = (end + timedelta(days=self.TERM_DAYS)).isoformat()
        policy["annual_premium"] = new_premium
        policy["balance_due"] = round(float(policy.get("balance_due", 0.0)) + new_premium, 2)
        policy["claims_paid"] = 0.0
        policy["renewal_count"] = int(policy.get("renewal_count", 0)) + 1
        policy["status"] = "active"
        return {"success": True, "message": f"Policy {policy_id} renewed to {policy['end_date']} at "
                                            f"{new_premium:.2f} a year.", "data": dict(policy)}

    def cancel_policy(self, policy_id: str, reason: str) -> dict:
        """Cancel an active or lapsed policy that has no open claims.

        Args:
            policy_id (str): The policy id.
            reason (str): Why the policy is cancelled.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(policy_id, str) or not policy_id.strip():
            return {"success": False, "error": "policy_id must be a non-empty string."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        policy = self.policies.get(policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found."}
        if policy.get("status") not in ("active", "lapsed"):
            return {"success": False, "error": f"Policy {policy_id} is {policy.get('status')}; only "
                                               "active or lapsed policies can be cancelled."}
        open_claims = sorted(str(c.get("claim_id")) for c in self.claims.values()
                             if c.get("policy_id") == policy_id
                             and c.get("status") in self.OPEN_CLAIM_STATUSES)
        if open_claims:
            return {"success": False, "error": f"Policy {policy_id} has open claims: "
                                               f"{', '.join(open_claims)}."}
        policy["status"] = "cancelled"
        policy["cancellation_reason"] = reason.strip()
        return {"success": True, "message": f"Policy {policy_id} cancelled."}
