import calendar
import math
from datetime import date, datetime, timedelta
from typing import Dict, Literal, Optional, TypedDict


class CustomerInfo(TypedDict):
    customer_id: str
    name: str
    email: str
    status: str  # "active" | "delinquent" | "closed"
    credit_balance: float  # account credit in USD, applied to invoices on request
    created_at: str  # ISO 8601 date-time


class PlanInfo(TypedDict):
    plan_id: str
    name: str
    interval: str  # "month" | "year"
    price: float  # USD per seat per interval
    status: str  # "active" | "retired"
    trial_days: int  # 0 = no trial


class SubscriptionInfo(TypedDict):
    subscription_id: str
    customer_id: str
    plan_id: str
    status: str  # "trialing" | "active" | "past_due" | "canceled"
    quantity: int  # seats
    current_period_start: str  # ISO 8601 date
    current_period_end: str  # ISO 8601 date
    cancel_at_period_end: bool
    canceled_at: Optional[str]  # ISO 8601 date-time
    created_at: str  # ISO 8601 date-time


class InvoiceInfo(TypedDict):
    invoice_id: str
    customer_id: str
    subscription_id: Optional[str]
    kind: str  # "subscription" | "proration" | "one_off"
    description: str
    amount_due: float  # total of the invoice
    amount_paid: float  # paid by payments
    credit_applied: float  # paid from account credit
    status: str  # "open" | "paid" | "void"
    issued_at: str  # ISO 8601 date
    due_date: str  # ISO 8601 date
    void_reason: Optional[str]


class PaymentInfo(TypedDict):
    payment_id: str
    invoice_id: str
    customer_id: str
    amount: float
    method: str  # "card" | "bank_transfer"
    created_at: str  # ISO 8601 date-time


class CreditNoteInfo(TypedDict):
    credit_note_id: str
    customer_id: str
    amount: float
    reason: str
    created_at: str  # ISO 8601 date-time


class SubscriptionBilling:
    NET_DAYS = 14
    MAX_SEATS = 500
    MAX_GOODWILL_CREDIT = 500.0
    LIVE_STATUSES = ["trialing", "active", "past_due"]

    def __init__(self, init_config: dict):
        # Billing customers (companies or people), by customer_id.
        self.customers: Dict[str, CustomerInfo] = {}
        # The price list, by plan_id.
        self.plans: Dict[str, PlanInfo] = {}
        # Subscriptions of customers to plans, by subscription_id.
        self.subscriptions: Dict[str, SubscriptionInfo] = {}
        # Invoices, by invoice_id.
        self.invoices: Dict[str, InvoiceInfo] = {}
        # Payments against invoices, by payment_id.
        self.payments: Dict[str, PaymentInfo] = {}
        # Account credits granted to customers (goodwill, proration, unused time), by id.
        self.credit_notes: Dict[str, CreditNoteInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - Subscriptions, invoices, payments and credit notes refer to existing customers, plans,
        #   subscriptions and invoices.
        # - A customer holds at most one live (trialing, active or past_due) subscription per plan.
        # - Only active customers (not delinquent, not closed) can start subscriptions, and only on
        #   active plans, with 1-500 seats.
        # - A new subscription starts today. It trials for the plan's trial_days when the customer
        #   never subscribed to that plan before (no invoice); otherwise it is active for one
        #   interval and an invoice of price x seats is issued, due in NET_DAYS (14) days.
        # - Plan and seat changes apply to trialing or active subscriptions that are not scheduled
        #   to cancel; the new plan must be active, different and of the same interval. For an
        #   active subscription the change is prorated over the days left in the period: a
        #   positive difference is invoiced, a negative one becomes account credit.
        # - Cancellation is at period end (scheduled) or immediate; past-due subscriptions can only
        #   be canceled immediately. Canceling an active subscription immediately, with no open
        #   invoice of it, credits the unused part of the period to the account.
        # - Only subscriptions scheduled to cancel (and not canceled yet) can be resumed.
        # - Payments and credit go to open invoices only, are positive and never exceed the
        #   invoice's remaining balance (amount_due - amount_paid - credit_applied); an invoice
        #   whose balance reaches zero is paid. Applied credit cannot exceed the account credit.
        # - Paying or voiding the last overdue invoice of a past_due subscription makes it active
        #   again; a delinquent customer with no overdue invoice left becomes active again.
        # - Only open invoices without payments or applied credit can be voided, with a reason.
        # - Goodwill credits are positive and at most MAX_GOODWILL_CREDIT (500.00) each.
        # - Closed customers get no new subscriptions or credits; an account can be closed only
        #   with no live subscription and no open invoice.

    def get_customer(self, customer_id: str) -> dict:
        """Get a customer's account.

        Args:
            customer_id (str): The customer's id, e.g. "C-1001".

        Returns:
            dict: {"success": True, "data": CustomerInfo plus "open_balance" and
            "live_subscriptions"}, or {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str) or not customer_id.strip():
            return {"success": False, "error": "customer_id must be a non-empty string."}
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        open_balance = sum(float(i.get("amount_due", 0)) - float(i.get("amount_paid", 0)) - float(i.get("credit_applied", 0))
                           for i in self.invoices.values()
                           if i.get("customer_id") == customer_id and i.get("status") == "open")
        data = dict(customer)
        data["open_balance"] = round(open_balance, 2)
        data["live_subscriptions"] = sum(1 for s in self.subscriptions.values()
                                         if s.get("customer_id") == customer_id and s.get("status") in self.LIVE_STATUSES)
        return {"success": True, "data": data}

    def find_customers(self, query: str) -> dict:
        """Find customers by name or email.

        Args:
            query (str): Text to look for (case-insensitive).

        Returns:
            dict: {"success": True, "data": List[CustomerInfo]} sorted by id, or
            {"success": False, "error": str}.
        """
        if not isinstance(query, str):
            return {"success": False, "error": "query must be a string."}
        needle = query.strip().lower()
        if not needle:
            return {"success": False, "error": "query must not be empty."}
        rows = [dict(c) for cid, c in sorted(self.customers.items())
                if needle in str(c.get("name", "")).lower() or needle in str(c.get("email", "")).lower()]
        return {"success": True, "data": rows}

    def list_plans(self, interval: Optional[Literal["month", "year"]] = None, include_retired: bool = False) -> dict:
        """List plans.

        Args:
            interval (str, optional): "month" or "year".
            include_retired (bool): Also list retired plans.

        Returns:
            dict: {"success": True, "data": List[PlanInfo]}, or {"success": False, "error": str}.
        """
        if interval is not None and interval not in ("month", "year"):
            return {"success": False, "error": "interval must be month or year."}
        if not isinstance(include_retired, bool):
            return {"success": False, "error": "include_retired must be a boolean."}
        rows = [dict(p) for p in self.plans.values()
                if (interval is None or p.get("interval") == interval)
                and (include_retired or p.get("status") == "active")]
        rows.sort(key=lambda p: (str(p.get("interval")), float(p.get("price", 0)), p["plan_id"]))
        return {"success": True, "data": rows}

    def get_plan(self, plan_id: str) -> dict:
        """Get a plan.

        Args:
            plan_id (str): The plan's id, e.g. "PL-GROWTH-M".

        Returns:
            dict: {"success": True, "data": PlanInfo}, or {"success": False, "error": str}.
        """
        if not isinstance(plan_id, str) or not plan_id.strip():
            return {"success": False, "error": "plan_id must be a non-empty string."}
        plan = self.plans.get(plan_id)
        if plan is None:
            return {"success": False, "error": f"Plan {plan_id} not found."}
        return {"success": True, "data": dict(plan)}

    def get_subscription(self, subscription_id: str) -> dict:
        """Get a subscription.

        Args:
            subscription_id (str): The subscription's id, e.g. "SUB-0003".

        Returns:
            dict: {"success": True, "data": SubscriptionInfo plus "plan_name", "price",
            "amount_per_period" and "open_invoice_ids"}, or {"success": False, "error": str}.
        """
        if not isinstance(subscription_id, str) or not subscription_id.strip():
            return {"success": False, "error": "subscription_id must be a non-empty string."}
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return {"success": False, "error": f"Subscription {subscription_id} not found."}
        plan = self.plans.get(subscription.get("plan_id"), {})
        data = dict(subscription)
        data["plan_name"] = plan.get("name")
        data["price"] = plan.get("price")
        data["amount_per_period"] = round(float(plan.get("price", 0)) * int(subscription.get("quantity", 0)), 2)
        data["open_invoice_ids"] = sorted(iid for iid, i in self.invoices.items()
                                          if i.get("subscription_id") == subscription_id and i.get("status") == "open")
        return {"success": True, "data": data}

    def list_customer_subscriptions(self, customer_id: str,
                                    status: Optional[Literal["trialing", "active", "past_due", "canceled"]] = None) -> dict:
        """List a customer's subscriptions.

        Args:
            customer_id (str): The customer.
            status (str, optional): "trialing", "active", "past_due" or "canceled".

        Returns:
            dict: {"success": True, "data": List[SubscriptionInfo]}, or {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str):
            return {"success": False, "error": "customer_id must be a string."}
        if status is not None and status not in ("trialing", "active", "past_due", "canceled"):
            return {"success": False, "error": "status must be trialing, active, past_due or canceled."}
        if customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        rows = [dict(s) for sid, s in sorted(self.subscriptions.items())
                if s.get("customer_id") == customer_id and (status is None or s.get("status") == status)]
        return {"success": True, "data": rows}

    def list_invoices(self, customer_id: str, status: Optional[Literal["open", "paid", "void"]] = None) -> dict:
        """List a customer's invoices.

        Args:
            customer_id (str): The customer.
            status (str, optional): "open", "paid" or "void".

        Returns:
            dict: {"success": True, "data": List[InvoiceInfo plus "remaining"]} by issue date, or
            {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str):
            return {"success": False, "error": "customer_id must be a string."}
        if status is not None and status not in ("open", "paid", "void"):
            return {"success": False, "error": "status must be open, paid or void."}
        if customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        rows = []
        for invoice in self.invoices.values():
            if invoice.get("customer_id") != customer_id or (status is not None and invoice.get("status") != status):
                continue
            row = dict(invoice)
            row["remaining"] = round(float(invoice.get("amount_due", 0)) - float(invoice.get("amount_paid", 0))
                                     - float(invoice.get("credit_applied", 0)), 2)
            rows.append(row)
        rows.sort(key=lambda r: (str(r.get("issued_at")), r["invoice_id"]))
        return {"success": True, "data": rows}

    def get_invoice(self, invoice_id: str) -> dict:
        """Get an invoice.

        Args:
            invoice_id (str): The invoice's id, e.g. "INV-0007".

        Returns:
            dict: {"success": True, "data": InvoiceInfo plus "remaining" and "payments"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(invoice_id, str) or not invoice_id.strip():
            return {"success": False, "error": "invoice_id must be a non-empty string."}
        invoice = self.invoices.get(invoice_id)
        if invoice is None:
            return {"success": False, "error": f"Invoice {invoice_id} not found."}
        data = dict(invoice)
        data["remaining"] = round(float(invoice.get("amount_due", 0)) - float(invoice.get("amount_paid", 0))
                                  - float(invoice.get("credit_applied", 0)), 2)
        data["payments"] = [dict(p) for pid, p in sorted(self.payments.items()) if p.get("invoice_id") == invoice_id]
        return {"success": True, "data": data}

    def list_payments(self, customer_id: str) -> dict:
        """List a customer's payments.

        Args:
            customer_id (str): The customer.

        Returns:
            dict: {"success": True, "data": List[PaymentInfo]}, or {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str) or not customer_id.strip():
            return {"success": False, "error": "customer_id must be a non-empty string."}
        if customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        rows = [dict(p) for p in self.payments.values() if p.get("customer_id") == customer_id]
        rows.sort(key=lambda p: (str(p.get("created_at")), p["payment_id"]))
        return {"success": True, "data": rows}

    def preview_plan_change(self, subscription_id: str, new_plan_id: str, quantity: Optional[int] = None) -> dict:
        """Preview a plan or seat change.

        Args:
            subscription_id (str): The subscription.
            new_plan_id (str): The target plan (may be the current one when only seats change).
            quantity (int, optional): The target number of seats; omit to keep the current count.

        Returns:
            dict: {"success": True, "data": {"prorated_amount", "action" ("invoice", "credit" or
            "none"), "remaining_days", "period_days", "new_amount_per_period"}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(subscription_id, str) or not isinstance(new_plan_id, str):
            return {"success": False, "error": "subscription_id and new_plan_id must be strings."}
        if quantity is not None and (not isinstance(quantity, int) or isinstance(quantity, bool)):
            return {"success": False, "error": "quantity must be an integer or null."}
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return {"success": False, "error": f"Subscription {subscription_id} not found."}
        if subscription.get("status") not in ("trialing", "active"):
            return {"success": False, "error": f"{subscription_id} is {subscription.get('status')}; only trialing or active subscriptions can change."}
        old_plan = self.plans.get(subscription.get("plan_id"), {})
        new_plan = self.plans.get(new_plan_id)
        if new_plan is None:
            return {"success": False, "error": f"Plan {new_plan_id} not found."}
        if new_plan.get("status") != "active":
            return {"success": False, "error": f"Plan {new_plan_id} is retired."}
        if new_plan.get("interval") != old_plan.get("interval"):
            return {"success": False, "error": "Plans can only change within the same billing interval."}
        seats = int(subscription.get("quantity", 1)) if quantity is None else quantity
        if not 1 <= seats <= self.MAX_SEATS:
            return {"success": False, "error": f"quantity must be between 1 and {self.MAX_SEATS}."}
        if new_plan_id == subscription.get("plan_id") and seats == subscription.get("quantity"):
            return {"success": False, "error": "Nothing would change."}
        try:
            start = date.fromisoformat(str(subscription.get("current_period_start"))[:10])
            end = date.fromisoformat(str(subscription.get("current_period_end"))[:10])
        except ValueError:
            return {"success": False, "error": f"{subscription_id} has an invalid billing period."}
        period_days = (end - start).days
        remaining = min(max((end - datetime.now().date()).days, 0), max(period_days, 0))
        old_amount = float(old_plan.get("price", 0)) * int(subscription.get("quantity", 0))
        new_amount = float(new_plan.get("price", 0)) * seats
        net = 0.0
        if subscription.get("status") == "active" and period_days > 0:
            net = round((new_amount - old_amount) * remaining / period_days, 2)
        action = "invoice" if net > 0 else "credit" if net < 0 else "none"
        return {"success": True, "data": {"prorated_amount": net, "action": action, "remaining_days": remaining,
                                          "period_days": period_days, "new_amount_per_period": round(new_amount, 2)}}

    def get_account_balance(self, customer_id: str) -> dict:
        """A customer's balance summary.

        Args:
            customer_id (str): The customer.

        Returns:
            dict: {"success": True, "data": {"customer_id", "credit_balance", "open_amount",
            "overdue_amount", "credit_notes"}}, or {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str) or not customer_id.strip():
            return {"success": False, "error": "customer_id must be a non-empty string."}
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        today = datetime.now().date().isoformat()
        open_amount = overdue_amount = 0.0
        for invoice in self.invoices.values():
            if invoice.get("customer_id") != customer_id or invoice.get("status") != "open":
                continue
            remaining = float(invoice.get("amount_due", 0)) - float(invoice.get("amount_paid", 0)) - float(invoice.get("credit_applied", 0))
            open_amount += remaining
            if str(invoice.get("due_date")) < today:
                overdue_amount += remaining
        notes = [dict(n) for nid, n in sorted(self.credit_notes.items()) if n.get("customer_id") == customer_id]
        return {"success": True, "data": {"customer_id": customer_id,
                                          "credit_balance": round(float(customer.get("credit_balance", 0)), 2),
                                          "open_amount": round(open_amount, 2), "overdue_amount": round(overdue_amount, 2),
                                          "credit_notes": notes}}

    def list_overdue_invoices(self, customer_id: Optional[str] = None) -> dict:
        """List overdue invoices.

        Args:
            customer_id (str, optional): Only this customer's invoices.

        Returns:
            dict: {"success": True, "data": [InvoiceInfo plus "remaining" and "days_overdue"]}, or
            {"success": False, "error": str}.
        """
        if customer_id is not None and not isinstance(customer_id, str):
            return {"success": False, "error": "customer_id must be a string or null."}
        if customer_id is not None and customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        today = datetime.now().date()
        rows = []
        for invoice in self.invoices.values():
            if invoice.get("status") != "open" or (customer_id is not None and invoice.get("customer_id") != customer_id):
                continue
            try:
                due = date.fromisoformat(str(invoice.get("due_date"))[:10])
            except ValueError:
                continue
            if due < today:
                row = dict(invoice)
                row["remaining"] = round(float(invoice.get("amount_due", 0)) - float(invoice.get("amount_paid", 0))
                                         - float(invoice.get("credit_applied", 0)), 2)
                row["days_overdue"] = (today - due).days
                rows.append(row)
        rows.sort(key=lambda r: (str(r.get("due_date")), r["invoice_id"]))
        return {"success": True, "data": rows}

    def create_subscription(self, customer_id: str, plan_id: str, quantity: int = 1) -> dict:
        """Start a subscription.

        Args:
            customer_id (str): An active customer.
            plan_id (str): An active plan the customer has no live subscription to.
            quantity (int): Seats, 1-500.

        Returns:
            dict: {"success": True, "message": str, "data": {"subscription_id", "status",
            "invoice_id"}}, or {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str) or not isinstance(plan_id, str):
            return {"success": False, "error": "customer_id and plan_id must be strings."}
        if not isinstance(quantity, int) or isinstance(quantity, bool):
            return {"success": False, "error": "quantity must be an integer."}
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        if customer.get("status") != "active":
            return {"success": False, "error": f"Customer {customer_id} is {customer.get('status')} and cannot start subscriptions."}
        plan = self.plans.get(plan_id)
        if plan is None:
            return {"success": False, "error": f"Plan {plan_id} not found."}
        if plan.get("status") != "active":
            return {"success": False, "error": f"Plan {plan_id} is retired."}
        if not 1 <= quantity <= self.MAX_SEATS:
            return {"success": False, "error": f"quantity must be between 1 and {self.MAX_SEATS}."}
        history = [s for s in self.subscriptions.values() if s.get("customer_id") == customer_id and s.get("plan_id") == plan_id]
        live = [s for s in history if s.get("status") in self.LIVE_STATUSES]
        if live:
            return {"success": False, "error": f"{customer_id} already has the live subscription {live[0]['subscription_id']} on {plan_id}."}
        now = datetime.now().replace(microsecond=0)
        start = now.date()
        number = len(self.subscriptions) + 1
        while f"SUB-{number:04d}" in self.subscriptions:
            number += 1
        subscription_id = f"SUB-{number:04d}"
        trial_days = int(plan.get("trial_days", 0) or 0)
        if trial_days > 0 and not history:
            end = start + timedelta(days=trial_days)
            status = "trialing"
        else:
            if plan.get("interval") == "year":
                year, month = start.year + 1, start.month
            else:
                year, month = start.year + start.month // 12, start.month % 12 + 1
            end = start.replace(year=year, month=month, day=min(start.day, calendar.monthrange(year, month)[1]))
            status = "active"
        self.subscriptions[subscription_id] = {
            "subscription_id": subscription_id, "customer_id": customer_id, "plan_id": plan_id, "status": status,
            "quantity": quantity, "current_period_start": start.isoformat(), "current_period_end": end.isoformat(),
            "cancel_at_period_end": False, "canceled_at": None, "created_at": now.isoformat()}
        invoice_id = None
        if status == "active":
            number = len(self.invoices) + 1
            while f"INV-{number:04d}" in self.invoices:
                number += 1
            invoice_id = f"INV-{number:04d}"
            amount = round(float(plan.get("price", 0)) * quantity, 2)
            self.invoices[invoice_id] = {
                "invoice_id": invoice_id, "customer_id": customer_id, "subscription_id": subscription_id,
                "kind": "subscription", "description": f"{plan.get('name')} x {quantity}, {start.isoformat()} to {end.isoformat()}",
                "amount_due": amount, "amount_paid": 0.0, "credit_applied": 0.0, "status": "open",
                "issued_at": start.isoformat(), "due_date": (start + timedelta(days=self.NET_DAYS)).isoformat(),
                "void_reason": None}
        what = f"trial until {end.isoformat()}" if status == "trialing" else f"invoice {invoice_id}"
        return {"success": True, "message": f"Subscription {subscription_id} started ({what}).",
                "data": {"subscription_id": subscription_id, "status": status, "invoice_id": invoice_id}}

    def change_plan(self, subscription_id: str, new_plan_id: str) -> dict:
        """Change a subscription's plan, with proration.

        Args:
            subscription_id (str): A trialing or active subscription not scheduled to cancel.
            new_plan_id (str): An active plan of the same interval.

        Returns:
            dict: {"success": True, "message": str, "data": {"prorated_amount", "invoice_id",
            "credit_note_id"}}, or {"success": False, "error": str}.
        """
        if not isinstance(subscription_id, str) or not isinstance(new_plan_id, str):
            return {"success": False, "error": "subscription_id and new_plan_id must be strings."}
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return {"success": False, "error": f"Subscription {subscription_id} not found."}
        if subscription.get("status") not in ("trialing", "active"):
            return {"success": False, "error": f"{subscription_id} is {subscription.get('status')}; only trialing or active subscriptions can change plan."}
        if subscription.get("cancel_at_period_end"):
            return {"success": False, "error": f"{subscription_id} is scheduled to cancel; resume it before changing the plan."}
        old_plan = self.plans.get(subscription.get("plan_id"), {})
        new_plan = self.plans.get(new_plan_id)
        if new_plan is None:
            return {"success": False, "error": f"Plan {new_plan_id} not found."}
        if new_plan_id == subscription.get("plan_id"):
            return {"success": False, "error": f"{subscription_id} is already on {new_plan_id}."}
        if new_plan.get("status") != "active":
            return {"success": False, "error": f"Plan {new_plan_id} is retired."}
        if new_plan.get("interval") != old_plan.get("interval"):
            return {"success": False, "error": "Plans can only change within the same billing interval."}
        customer_id = subscription.get("customer_id")
        clash = [s for s in self.subscriptions.values() if s.get("customer_id") == customer_id
                 and s.get("plan_id") == new_plan_id and s.get("status") in self.LIVE_STATUSES]
        if clash:
            return {"success": False, "error": f"{customer_id} already has the live subscription {clash[0]['subscription_id']} on {new_plan_id}."}
        try:
            start = date.fromisoformat(str(subscription.get("current_period_start"))[:10])
            end = date.fromisoformat(str(subscription.get("current_period_end"))[:10])
        except ValueError:
            return {"success": False, "error": f"{subscription_id} has an invalid billing period."}
        now = datetime.now().replace(microsecond=0)
        today = now.date()
        period_days = (end - start).days
        remaining = min(max((end - today).days, 0), max(period_days, 0))
        seats = int(subscription.get("quantity", 1))
        net = 0.0
        if subscription.get("status") == "active" and period_days > 0:
            net = round((float(new_plan.get("price", 0)) - float(old_plan.get("price", 0))) * seats * remaining / period_days, 2)
        old_plan_id = subscription.get("plan_id")
        subscription["plan_id"] = new_plan_id
        invoice_id = credit_note_id = None
        if net > 0:
            number = len(self.invoices) + 1
            while f"INV-{number:04d}" in self.invoices:
                number += 1
            invoice_id = f"INV-{number:04d}"
            self.invoices[invoice_id] = {
                "invoice_id": invoice_id, "customer_id": customer_id, "subscription_id": subscription_id,
                "kind": "proration", "description": f"Proration {old_plan_id} -> {new_plan_id} x {seats}, {remaining}/{period_days} days",
                "amount_due": net, "amount_paid": 0.0, "credit_applied": 0.0, "status": "open",
                "issued_at": today.isoformat(), "due_date": (today + timedelta(days=self.NET_DAYS)).isoformat(),
                "void_reason": None}
        elif net < 0:
            customer = self.customers.get(customer_id)
            if customer is not None:
                customer["credit_balance"] = round(float(customer.get("credit_balance", 0)) - net, 2)
            number = len(self.credit_notes) + 1
            while f"CN-{number:04d}" in self.credit_notes:
                number += 1
            credit_note_id = f"CN-{number:04d}"
            self.credit_notes[credit_note_id] = {
                "credit_note_id": credit_note_id, "customer_id": customer_id, "amount": round(-net, 2),
                "reason": f"Proration credit for {subscription_id}: {old_plan_id} -> {new_plan_id}",
                "created_at": now.isoformat()}
        return {"success": True, "message": f"{subscription_id} moved from {old_plan_id} to {new_plan_id}.",
                "data": {"prorated_amount": net, "invoice_id": invoice_id, "credit_note_id": credit_note_id}}

    def update_seats(self, subscription_id: str, quantity: int) -> dict:
        """Change a subscription's seat count, with proration.

        Args:
            subscription_id (str): A trialing or active subscription not scheduled to cancel.
            quantity (int): The new number of seats, 1-500.

        Returns:
            dict: {"success": True, "message": str, "data": {"prorated_amount", "invoice_id",
            "credit_note_id"}}, or {"success": False, "error": str}.
        """
        if not isinstance(subscription_id, str):
            return {"success": False, "error": "subscription_id must be a string."}
        if not isinstance(quantity, int) or isinstance(quantity, bool):
            return {"success": False, "error": "quantity must be an integer."}
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return {"success": False, "error": f"Subscription {subscription_id} not found."}
        if subscription.get("status") not in ("trialing", "active"):
            return {"success": False, "error": f"{subscription_id} is {subscription.get('status')}; only trialing or active subscriptions can change seats."}
        if subscription.get("cancel_at_period_end"):
            return {"success": False, "error": f"{subscription_id} is scheduled to cancel; resume it before changing seats."}
        if not 1 <= quantity <= self.MAX_SEATS:
            return {"success": False, "error": f"quantity must be between 1 and {self.MAX_SEATS}."}
        old_seats = int(subscription.get("quantity", 1))
        if quantity == old_seats:
            return {"success": False, "error": f"{subscription_id} already has {quantity} seats."}
        plan = self.plans.get(subscription.get("plan_id"), {})
        try:
            start = date.fromisoformat(str(subscription.get("current_period_start"))[:10])
            end = date.fromisoformat(str(subscription.get("current_period_end"))[:10])
        except ValueError:
            return {"success": False, "error": f"{subscription_id} has an invalid billing period."}
        now = datetime.now().replace(microsecond=0)
        today = now.date()
        period_days = (end - start).days
        remaining = min(max((end - today).days, 0), max(period_days, 0))
        net = 0.0
        if subscription.get("status") == "active" and period_days > 0:
            net = round(float(plan.get("price", 0)) * (quantity - old_seats) * remaining / period_days, 2)
        subscription["quantity"] = quantity
        customer_id = subscription.get("customer_id")
        invoice_id = credit_note_id = None
        if net > 0:
            number = len(self.invoices) + 1
            while f"INV-{number:04d}" in self.invoices:
                number += 1
            invoice_id = f"INV-{number:04d}"
            self.invoices[invoice_id] = {
                "invoice_id": invoice_id, "customer_id": customer_id, "subscription_id": subscription_id,
                "kind": "proration", "description": f"Proration {old_seats} -> {quantity} seats, {remaining}/{period_days} days",
                "amount_due": net, "amount_paid": 0.0, "credit_applied": 0.0, "status": "open",
                "issued_at": today.isoformat(), "due_date": (today + timedelta(days=self.NET_DAYS)).isoformat(),
                "void_reason": None}
        elif net < 0:
            customer = self.customers.get(customer_id)
            if customer is not None:
                customer["credit_balance"] = round(float(customer.get("credit_balance", 0)) - net, 2)
            number = len(self.credit_notes) + 1
            while f"CN-{number:04d}" in self.credit_notes:
                number += 1
            credit_note_id = f"CN-{number:04d}"
            self.credit_notes[credit_note_id] = {
                "credit_note_id": credit_note_id, "customer_id": customer_id, "amount": round(-net, 2),
                "reason": f"Proration credit for {subscription_id}: {old_seats} -> {quantity} seats",
                "created_at": now.isoformat()}
        return {"success": True, "message": f"{subscription_id} now has {quantity} seats.",
                "data": {"prorated_amount": net, "invoice_id": invoice_id, "credit_note_id": credit_note_id}}

    def cancel_subscription(self, subscription_id: str, at_period_end: bool = True) -> dict:
        """Cancel a subscription.

        Args:
            subscription_id (str): A trialing, active or past_due subscription.
            at_period_end (bool): True schedules the cancellation for the end of the period;
                False cancels now.

        Returns:
            dict: {"success": True, "message": str, "data": {"credited": float}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(subscription_id, str):
            return {"success": False, "error": "subscription_id must be a string."}
        if not isinstance(at_period_end, bool):
            return {"success": False, "error": "at_period_end must be a boolean."}
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return {"success": False, "error": f"Subscription {subscription_id} not found."}
        status = subscription.get("status")
        if status not in self.LIVE_STATUSES:
            return {"success": False, "error": f"{subscription_id} is already {status}."}
        if at_period_end:
            if status == "past_due":
                return {"success": False, "error": f"{subscription_id} is past due and can only be canceled immediately."}
            if subscription.get("cancel_at_period_end"):
                return {"success": False, "error": f"{subscription_id} is already scheduled to cancel on {subscription.get('current_period_end')}."}
            subscription["cancel_at_period_end"] = True
            return {"success": True, "message": f"{subscription_id} will cancel on {subscription.get('current_period_end')}.",
                    "data": {"credited": 0.0}}
        now = datetime.now().replace(microsecond=0)
        credited = 0.0
        open_invoices = [i for i in self.invoices.values()
                         if i.get("subscription_id") == subscription_id and i.get("status") == "open"]
        if status == "active" and not open_invoices:
            try:
                start = date.fromisoformat(str(subscription.get("current_period_start"))[:10])
                end = date.fromisoformat(str(subscription.get("current_period_end"))[:10])
            except ValueError:
                start = end = now.date()
            period_days = (end - start).days
            remaining = min(max((end - now.date()).days, 0), max(period_days, 0))
            plan = self.plans.get(subscription.get("plan_id"), {})
            if period_days > 0:
                credited = round(float(plan.get("price", 0)) * int(subscription.get("quantity", 0)) * remaining / period_days, 2)
        subscription["status"] = "canceled"
        subscription["cancel_at_period_end"] = False
        subscription["canceled_at"] = now.isoformat()
        if credited > 0:
            customer = self.customers.get(subscription.get("customer_id"))
            if customer is not None:
                customer["credit_balance"] = round(float(customer.get("credit_balance", 0)) + credited, 2)
            number = len(self.credit_notes) + 1
            while f"CN-{number:04d}" in self.credit_notes:
                number += 1
            credit_note_id = f"CN-{number:04d}"
            self.credit_notes[credit_note_id] = {
                "credit_note_id": credit_note_id, "customer_id": subscription.get("customer_id"), "amount": credited,
                "reason": f"Unused time on {subscription_id}", "created_at": now.isoformat()}
        return {"success": True, "message": f"{subscription_id} canceled.", "data": {"credited": credited}}

    def resume_subscription(self, subscription_id: str) -> dict:
        """Resume a subscription scheduled to cancel.

        Args:
            subscription_id (str): The subscription.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(subscription_id, str):
            return {"success": False, "error": "subscription_id must be a string."}
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return {"success": False, "error": f"Subscription {subscription_id} not found."}
        if subscription.get("status") not in ("trialing", "active"):
            return {"success": False, "error": f"{subscription_id} is {subscription.get('status')} and cannot be resumed."}
        if not subscription.get("cancel_at_period_end"):
            return {"success": False, "error": f"{subscription_id} is not scheduled to cancel."}
        subscription["cancel_at_period_end"] = False
        return {"success": True, "message": f"{subscription_id} will renew as usual."}

    def pay_invoice(self, invoice_id: str, amount: float, method: Literal["card", "bank_transfer"] = "card") -> dict:
        """Pay (part of) an invoice.

        Args:
            invoice_id (str): An open invoice.
            amount (float): The amount in USD, positive and at most the remaining balance.
            method (str): "card" or "bank_transfer".

        Returns:
            dict: {"success": True, "message": str, "data": {"payment_id", "remaining"}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(invoice_id, str) or not isinstance(method, str):
            return {"success": False, "error": "invoice_id and method must be strings."}
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or not math.isfinite(amount):
            return {"success": False, "error": "amount must be a number."}
        if method not in ("card", "bank_transfer"):
            return {"success": False, "error": "method must be card or bank_transfer."}
        invoice = self.invoices.get(invoice_id)
        if invoice is None:
            return {"success": False, "error": f"Invoice {invoice_id} not found."}
        if invoice.get("status") != "open":
            return {"success": False, "error": f"Invoice {invoice_id} is {invoice.get('status')}."}
        customer_id = invoice.get("customer_id")
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        amount = round(float(amount), 2)
        remaining = round(float(invoice.get("amount_due", 0)) - float(invoice.get("amount_paid", 0)) - float(invoice.get("credit_applied", 0)), 2)
        if amount <= 0:
            return {"success": False, "error": "amount must be positive."}
        if amount > remaining:
            return {"success": False, "error": f"amount {amount:.2f} exceeds the remaining balance {remaining:.2f} of {invoice_id}."}
        now = datetime.now().replace(microsecond=0)
        number = len(self.payments) + 1
        while f"PAY-{number:04d}" in self.payments:
            number += 1
        payment_id = f"PAY-{number:04d}"
        self.payments[payment_id] = {"payment_id": payment_id, "invoice_id": invoice_id, "customer_id": customer_id,
                                     "amount": amount, "method": method, "created_at": now.isoformat()}
        invoice["amount_paid"] = round(float(invoice.get("amount_paid", 0)) + amount, 2)
        remaining = round(remaining - amount, 2)
        if remaining <= 0:
            invoice["status"] = "paid"
            today = now.date().isoformat()
            subscription = self.subscriptions.get(invoice.get("subscription_id") or "")
            if subscription is not None and subscription.get("status") == "past_due":
                overdue = [i for i in self.invoices.values() if i.get("subscription_id") == subscription.get("subscription_id")
                           and i.get("status") == "open" and str(i.get("due_date")) < today]
                if not overdue:
                    subscription["status"] = "active"
            if customer.get("status") == "delinquent":
                overdue = [i for i in self.invoices.values() if i.get("customer_id") == customer_id
                           and i.get("status") == "open" and str(i.get("due_date")) < today]
                if not overdue:
                    customer["status"] = "active"
        return {"success": True, "message": f"Payment {payment_id} of {amount:.2f} recorded on {invoice_id}.",
                "data": {"payment_id": payment_id, "remaining": remaining}}

    def apply_account_credit(self, invoice_id: str, amount: Optional[float] = None) -> dict:
        """Pay an invoice from account credit.

        Args:
            invoice_id (str): An open invoice.
            amount (float, optional): How much credit to apply; omit to apply as much as possible.

        Returns:
            dict: {"success": True, "message": str, "data": {"applied", "remaining",
            "credit_balance"}}, or {"success": False, "error": str}.
        """
        if not isinstance(invoice_id, str):
            return {"success": False, "error": "invoice_id must be a string."}
        if amount is not None and (not isinstance(amount, (int, float)) or isinstance(amount, bool) or not math.isfinite(amount)):
            return {"success": False, "error": "amount must be a number or null."}
        invoice = self.invoices.get(invoice_id)
        if invoice is None:
            return {"success": False, "error": f"Invoice {invoice_id} not found."}
        if invoice.get("status") != "open":
            return {"success": False, "error": f"Invoice {invoice_id} is {invoice.get('status')}."}
        customer_id = invoice.get("customer_id")
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        credit = round(float(customer.get("credit_balance", 0)), 2)
        remaining = round(float(invoice.get("amount_due", 0)) - float(invoice.get("amount_paid", 0)) - float(invoice.get("credit_applied", 0)), 2)
        if credit <= 0:
            return {"success": False, "error": f"{customer_id} has no account credit."}
        applied = min(credit, remaining) if amount is None else round(float(amount), 2)
        if applied <= 0:
            return {"success": False, "error": "The amount to apply must be positive."}
        if applied > credit:
            return {"success": False, "error": f"Only {credit:.2f} of account credit is available."}
        if applied > remaining:
            return {"success": False, "error": f"{applied:.2f} exceeds the remaining balance {remaining:.2f} of {invoice_id}."}
        customer["credit_balance"] = round(credit - applied, 2)
        invoice["credit_applied"] = round(float(invoice.get("credit_applied", 0)) + applied, 2)
        remaining = round(remaining - applied, 2)
        if remaining <= 0:
            invoice["status"] = "paid"
            today = datetime.now().date().isoformat()
            subscription = self.subscriptions.get(invoice.get("subscription_id") or "")
            if subscription is not None and subscription.get("status") == "past_due":
                overdue = [i for i in self.invoices.values() if i.get("subscription_id") == subscription.get("subscription_id")
                           and i.get("status") == "open" and str(i.get("due_date")) < today]
                if not overdue:
                    subscription["status"] = "active"
            if customer.get("status") == "delinquent":
                overdue = [i for i in self.invoices.values() if i.get("customer_id") == customer_id
                           and i.get("status") == "open" and str(i.get("due_date")) < today]
                if not overdue:
                    customer["status"] = "active"
        return {"success": True, "message": f"{applied:.2f} of credit applied to {invoice_id}.",
                "data": {"applied": applied, "remaining": remaining, "credit_balance": customer["credit_balance"]}}

    def void_invoice(self, invoice_id: str, reason: str) -> dict:
        """Void an invoice.

        Args:
            invoice_id (str): An open invoice without payments or applied credit.
            reason (str): Why it is voided.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(invoice_id, str) or not isinstance(reason, str):
            return {"success": False, "error": "invoice_id and reason must be strings."}
        invoice = self.invoices.get(invoice_id)
        if invoice is None:
            return {"success": False, "error": f"Invoice {invoice_id} not found."}
        if invoice.get("status") != "open":
            return {"success": False, "error": f"Invoice {invoice_id} is {invoice.get('status')}."}
        if float(invoice.get("amount_paid", 0)) > 0 or float(invoice.get("credit_applied", 0)) > 0:
            return {"success": False, "error": f"Invoice {invoice_id} has payments or credit applied and cannot be voided."}
        if not reason.strip():
            return {"success": False, "error": "A reason is required."}
        invoice["status"] = "void"
        invoice["void_reason"] = reason.strip()
        today = datetime.now().date().isoformat()
        subscription = self.subscriptions.get(invoice.get("subscription_id") or "")
        if subscription is not None and subscription.get("status") == "past_due":
            overdue = [i for i in self.invoices.values() if i.get("subscription_id") == subscription.get("subscription_id")
                       and i.get("status") == "open" and str(i.get("due_date")) < today]
            if not overdue:
                subscription["status"] = "active"
        customer = self.customers.get(invoice.get("customer_id"))
        if customer is not None and customer.get("status") == "delinquent":
            overdue = [i for i in self.invoices.values() if i.get("customer_id") == invoice.get("customer_id")
                       and i.get("status") == "open" and str(i.get("due_date")) < today]
            if not overdue:
                customer["status"] = "active"
        return {"success": True, "message": f"Invoice {invoice_id} voided."}

    def issue_credit(self, customer_id: str, amount: float, reason: str) -> dict:
        """Grant account credit.

        Args:
            customer_id (str): A customer whose account is not closed.
            amount (float): USD, more than 0 and at most 500.00.
            reason (str): Why the credit is granted.

        Returns:
            dict: {"success": True, "message": str, "data": {"credit_note_id", "credit_balance"}},
            or {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str) or not isinstance(reason, str):
            return {"success": False, "error": "customer_id and reason must be strings."}
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or not math.isfinite(amount):
            return {"success": False, "error": "amount must be a number."}
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        if customer.get("status") == "closed":
            return {"success": False, "error": f"Customer {customer_id} is closed."}
        amount = round(float(amount), 2)
        if amount <= 0 or amount > self.MAX_GOODWILL_CREDIT:
            return {"success": False, "error": f"Credits must be more than 0 and at most {self.MAX_GOODWILL_CREDIT:.2f}."}
        if not reason.strip():
            return {"success": False, "error": "A reason is required."}
        number = len(self.credit_notes) + 1
        while f"CN-{number:04d}" in self.credit_notes:
            number += 1
        credit_note_id = f"CN-{number:04d}"
        self.credit_notes[credit_note_id] = {"credit_note_id": credit_note_id, "customer_id": customer_id, "amount": amount,
                                             "reason": reason.strip(),
                                             "created_at": datetime.now().replace(microsecond=0).isoformat()}
        customer["credit_balance"] = round(float(customer.get("credit_balance", 0)) + amount, 2)
        return {"success": True, "message": f"{amount:.2f} credited to {customer_id} ({credit_note_id}).",
                "data": {"credit_note_id": credit_note_id, "credit_balance": customer["credit_balance"]}}

    def close_customer_account(self, customer_id: str) -> dict:
        """Close a customer account.

        Args:
            customer_id (str): The customer.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(customer_id, str):
            return {"success": False, "error": "customer_id must be a string."}
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found."}
        if customer.get("status") == "closed":
            return {"success": False, "error": f"Customer {customer_id} is already closed."}
        live = sorted(sid for sid, s in self.subscriptions.items()
                      if s.get("customer_id") == customer_id and s.get("status") in self.LIVE_STATUSES)
        if live:
            return {"success": False, "error": f"{customer_id} still has live subscriptions: {', '.join(live)}."}
        open_invoices = sorted(iid for iid, i in self.invoices.items()
                               if i.get("customer_id") == customer_id and i.get("status") == "open")
        if open_invoices:
            return {"success": False, "error": f"{customer_id} still has open invoices: {', '.join(open_invoices)}."}
        customer["status"] = "closed"
        return {"success": True, "message": f"Customer {customer_id} closed."}
