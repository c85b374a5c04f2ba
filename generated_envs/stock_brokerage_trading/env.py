from datetime import datetime
from typing import Dict, Literal, Optional, TypedDict


class AccountInfo(TypedDict):
    account_id: str
    owner_name: str
    email: str
    account_type: str  # "individual" | "joint" | "retirement"
    status: str  # "active" | "frozen" | "closed"
    cash_balance: float  # settled cash in the account
    reserved_cash: float  # cash held back for open buy limit orders
    opened_date: str  # ISO date


class InstrumentInfo(TypedDict):
    symbol: str
    name: str
    sector: str
    exchange: str
    last_price: float
    status: str  # "active" | "halted"


class OrderInfo(TypedDict):
    order_id: str
    account_id: str
    symbol: str
    side: str  # "buy" | "sell"
    order_type: str  # "market" | "limit"
    quantity: int
    limit_price: Optional[float]  # None for market orders
    status: str  # "open" | "filled" | "cancelled"
    filled_price: Optional[float]  # None until filled
    commission: float  # 4.95 once filled, else 0.0
    created_at: str  # ISO 8601 date-time
    updated_at: str  # ISO 8601 date-time


class PositionInfo(TypedDict):
    position_id: str
    account_id: str
    symbol: str
    quantity: int  # shares held
    reserved_quantity: int  # shares held back for open sell limit orders
    average_cost: float  # average price paid per share


class TransactionInfo(TypedDict):
    transaction_id: str
    account_id: str
    type: str  # "deposit" | "withdrawal" | "buy" | "sell"
    amount: float  # always positive; the type gives the direction
    balance_after: float  # cash balance after the transaction
    created_at: str  # ISO 8601 date-time
    reference: str  # free text, or the order id for trades


class BrokerageTradingSystem:
    COMMISSION = 4.95
    MAX_ORDER_QUANTITY = 10000
    MAX_SINGLE_DEPOSIT = 250000.0
    RETIREMENT_ANNUAL_DEPOSIT_LIMIT = 7000.0

    def __init__(self, init_config: dict):
        # Brokerage accounts, by account_id.
        self.accounts: Dict[str, AccountInfo] = {}
        # Tradable instruments (stocks and ETFs), by ticker symbol.
        self.instruments: Dict[str, InstrumentInfo] = {}
        # Orders, by order_id.
        self.orders: Dict[str, OrderInfo] = {}
        # Holdings of an account in one instrument, by position_id.
        self.positions: Dict[str, PositionInfo] = {}
        # Cash ledger (deposits, withdrawals, trade settlements), by transaction_id.
        self.transactions: Dict[str, TransactionInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - Orders may be placed or amended only for active accounts and active (not halted)
        #   instruments.
        # - An order is for a whole number of shares between 1 and 10,000; a limit order needs a
        #   positive limit price, a market order takes none.
        # - Every filled order is charged a flat commission of 4.95.
        # - Buying power is cash_balance - reserved_cash. A buy needs quantity x price + commission
        #   within the buying power (price: the last price, or the limit price of a resting order).
        # - Market orders fill at once at the last price. A buy limit at or above the last price,
        #   or a sell limit at or below it, fills at once at the last price; otherwise the order
        #   rests "open" and reserves its cash (buy) or its shares (sell).
        # - No short selling: a sell needs quantity <= position quantity - reserved quantity.
        # - Only open orders can be cancelled or amended; cancelling releases the reservation.
        # - A price update fills the open limit orders it crosses, oldest first, at the new price
        #   (not while the instrument is halted).
        # - Deposits are positive and at most 250,000.00 each; a retirement account takes at most
        #   7,000.00 of deposits per calendar year.
        # - Withdrawals may not exceed the buying power and are not allowed from retirement
        #   accounts.
        # - Frozen accounts cannot trade or withdraw; they may receive deposits and cancel orders.
        #   Closed accounts accept no operation.
        # - An account can be closed only with no shares held, no open orders and zero cash.

    def get_account(self, account_id: str) -> dict:
        """Get an account's details and its current buying power.

        Args:
            account_id (str): The account id, e.g. "ACC-1001".

        Returns:
            dict: {"success": True, "data": account record plus "buying_power"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        data = dict(account)
        data["buying_power"] = round(account["cash_balance"] - account["reserved_cash"], 2)
        return {"success": True, "data": data}

    def find_accounts_by_owner(self, name: str) -> dict:
        """Find accounts whose owner name contains the given text (case-insensitive).

        Args:
            name (str): Part of the owner's name, e.g. "Okafor".

        Returns:
            dict: {"success": True, "data": [account records]} sorted by account id, or
            {"success": False, "error": str}.
        """
        if not isinstance(name, str) or not name.strip():
            return {"success": False, "error": "name must be a non-empty string."}
        needle = name.strip().lower()
        found = [dict(account) for account_id, account in sorted(self.accounts.items())
                 if needle in str(account.get("owner_name", "")).lower()]
        return {"success": True, "data": found}

    def list_accounts(self, status: Optional[str] = None, account_type: Optional[str] = None) -> dict:
        """List accounts, optionally filtered by status and account type.

        Args:
            status (Optional[str]): "active", "frozen" or "closed"; None for all.
            account_type (Optional[str]): "individual", "joint" or "retirement"; None for all.

        Returns:
            dict: {"success": True, "data": [account records]} sorted by account id, or
            {"success": False, "error": str}.
        """
        if status is not None and (not isinstance(status, str)
                                   or status not in ("active", "frozen", "closed")):
            return {"success": False, "error": "status must be active, frozen or closed."}
        if account_type is not None and (not isinstance(account_type, str) or account_type
                                         not in ("individual", "joint", "retirement")):
            return {"success": False,
                    "error": "account_type must be individual, joint or retirement."}
        found = [dict(account) for account_id, account in sorted(self.accounts.items())
                 if (status is None or account.get("status") == status)
                 and (account_type is None or account.get("account_type") == account_type)]
        return {"success": True, "data": found}

    def get_portfolio(self, account_id: str) -> dict:
        """Get an account's holdings valued at the last prices, with cash and totals.

        Args:
            account_id (str): The account id.

        Returns:
            dict: {"success": True, "data": {"account_id", "cash_balance", "buying_power",
            "positions": [{symbol, quantity, reserved_quantity, average_cost, last_price,
            market_value, unrealized_pl}], "market_value", "total_equity"}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        holdings = []
        market_value = 0.0
        for position_id, position in sorted(self.positions.items()):
            if position.get("account_id") != account_id or position.get("quantity", 0) <= 0:
                continue
            instrument = self.instruments.get(position["symbol"], {})
            price = float(instrument.get("last_price", 0.0))
            value = round(position["quantity"] * price, 2)
            market_value += value
            holdings.append({
                "position_id": position_id, "symbol": position["symbol"],
                "quantity": position["quantity"],
                "reserved_quantity": position.get("reserved_quantity", 0),
                "average_cost": position["average_cost"], "last_price": price,
                "market_value": value,
                "unrealized_pl": round(value - position["quantity"] * position["average_cost"], 2)})
        cash = account["cash_balance"]
        return {"success": True, "data": {
            "account_id": account_id, "cash_balance": cash,
            "buying_power": round(cash - account["reserved_cash"], 2), "positions": holdings,
            "market_value": round(market_value, 2), "total_equity": round(cash + market_value, 2)}}

    def get_instrument(self, symbol: str) -> dict:
        """Get an instrument's details and last price by ticker symbol.

        Args:
            symbol (str): The ticker symbol, e.g. "NVLT" (case-insensitive).

        Returns:
            dict: {"success": True, "data": instrument record}, or {"success": False, "error": str}.
        """
        if not isinstance(symbol, str) or not symbol.strip():
            return {"success": False, "error": "symbol must be a non-empty string."}
        instrument = self.instruments.get(symbol.strip().upper())
        if instrument is None:
            return {"success": False, "error": f"Instrument {symbol} not found."}
        return {"success": True, "data": dict(instrument)}

    def list_instruments(self, sector: Optional[str] = None, status: Optional[str] = None) -> dict:
        """List instruments, optionally filtered by sector and trading status.

        Args:
            sector (Optional[str]): Sector name, e.g. "Technology" (case-insensitive); None for all.
            status (Optional[str]): "active" or "halted"; None for all.

        Returns:
            dict: {"success": True, "data": [instrument records]} sorted by symbol, or
            {"success": False, "error": str}.
        """
        if sector is not None and not isinstance(sector, str):
            return {"success": False, "error": "sector must be a string."}
        if status is not None and (not isinstance(status, str) or status not in ("active", "halted")):
            return {"success": False, "error": "status must be active or halted."}
        found = [dict(instrument) for symbol, instrument in sorted(self.instruments.items())
                 if (sector is None or str(instrument.get("sector", "")).lower()
                     == sector.strip().lower())
                 and (status is None or instrument.get("status") == status)]
        return {"success": True, "data": found}

    def get_order(self, order_id: str) -> dict:
        """Get an order by id.

        Args:
            order_id (str): The order id, e.g. "ORD-0001".

        Returns:
            dict: {"success": True, "data": order record}, or {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not order_id.strip():
            return {"success": False, "error": "order_id must be a non-empty string."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        return {"success": True, "data": dict(order)}

    def list_orders(self, account_id: str, status: Optional[str] = None,
                    symbol: Optional[str] = None) -> dict:
        """List an account's orders, optionally filtered by status and symbol.

        Args:
            account_id (str): The account id.
            status (Optional[str]): "open", "filled" or "cancelled"; None for all.
            symbol (Optional[str]): Only orders for this ticker symbol; None for all.

        Returns:
            dict: {"success": True, "data": [order records]} oldest first, or
            {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if status is not None and (not isinstance(status, str)
                                   or status not in ("open", "filled", "cancelled")):
            return {"success": False, "error": "status must be open, filled or cancelled."}
        if symbol is not None and not isinstance(symbol, str):
            return {"success": False, "error": "symbol must be a string."}
        if account_id not in self.accounts:
            return {"success": False, "error": f"Account {account_id} not found."}
        wanted = symbol.strip().upper() if symbol is not None else None
        found = [dict(order) for order in self.orders.values()
                 if order.get("account_id") == account_id
                 and (status is None or order.get("status") == status)
                 and (wanted is None or order.get("symbol") == wanted)]
        found.sort(key=lambda order: (order.get("created_at", ""), order.get("order_id", "")))
        return {"success": True, "data": found}

    def get_position(self, account_id: str, symbol: str) -> dict:
        """Get an account's position in one instrument.

        Args:
            account_id (str): The account id.
            symbol (str): The ticker symbol.

        Returns:
            dict: {"success": True, "data": position record}, or {"success": False, "error": str}
            when the account holds no position in the symbol.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if not isinstance(symbol, str) or not symbol.strip():
            return {"success": False, "error": "symbol must be a non-empty string."}
        if account_id not in self.accounts:
            return {"success": False, "error": f"Account {account_id} not found."}
        wanted = symbol.strip().upper()
        for position in self.positions.values():
            if position.get("account_id") == account_id and position.get("symbol") == wanted:
                return {"success": True, "data": dict(position)}
        return {"success": False, "error": f"Account {account_id} has no position in {wanted}."}

    def list_transactions(self, account_id: str, transaction_type: Optional[str] = None) -> dict:
        """List the cash ledger entries of an account, oldest first.

        Args:
            account_id (str): The account id.
            transaction_type (Optional[str]): "deposit", "withdrawal", "buy" or "sell"; None for all.

        Returns:
            dict: {"success": True, "data": [transaction records]}, or
            {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if transaction_type is not None and (
                not isinstance(transaction_type, str)
                or transaction_type not in ("deposit", "withdrawal", "buy", "sell")):
            return {"success": False,
                    "error": "transaction_type must be deposit, withdrawal, buy or sell."}
        if account_id not in self.accounts:
            return {"success": False, "error": f"Account {account_id} not found."}
        found = [dict(entry) for entry in self.transactions.values()
                 if entry.get("account_id") == account_id
                 and (transaction_type is None or entry.get("type") == transaction_type)]
        found.sort(key=lambda entry: (entry.get("created_at", ""), entry.get("transaction_id", "")))
        return {"success": True, "data": found}

    def quote_order(self, account_id: str, symbol: str, side: Literal["buy", "sell"], quantity: int,
                    order_type: Literal["market", "limit"] = "market",
                    limit_price: Optional[float] = None) -> dict:
        """Estimate an order without placing it: price, total, and whether the account can afford
        it (buy) or holds enough free shares (sell).

        Args:
            account_id (str): The account id.
            symbol (str): The ticker symbol.
            side (str): "buy" or "sell".
            quantity (int): Number of shares (1-10,000).
            order_type (str): "market" (default) or "limit".
            limit_price (Optional[float]): The limit price, required for limit orders.

        Returns:
            dict: {"success": True, "data": {"symbol", "side", "quantity", "last_price",
            "estimated_price", "fills_immediately", "estimated_total", "buying_power",
            "available_shares", "feasible"}}, or {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if not isinstance(symbol, str) or not symbol.strip():
            return {"success": False, "error": "symbol must be a non-empty string."}
        if not isinstance(side, str) or side not in ("buy", "sell"):
            return {"success": False, "error": "side must be buy or sell."}
        if isinstance(quantity, bool) or not isinstance(quantity, int):
            return {"success": False, "error": "quantity must be an integer."}
        if not isinstance(order_type, str) or order_type not in ("market", "limit"):
            return {"success": False, "error": "order_type must be market or limit."}
        if limit_price is not None and (isinstance(limit_price, bool)
                                        or not isinstance(limit_price, (int, float))):
            return {"success": False, "error": "limit_price must be a number."}
        if quantity < 1 or quantity > self.MAX_ORDER_QUANTITY:
            return {"success": False, "error": "quantity must be between 1 and 10000 shares."}
        if order_type == "limit" and (limit_price is None or limit_price <= 0):
            return {"success": False, "error": "A limit order needs a positive limit_price."}
        if order_type == "market" and limit_price is not None:
            return {"success": False, "error": "A market order takes no limit_price."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        ticker = symbol.strip().upper()
        instrument = self.instruments.get(ticker)
        if instrument is None:
            return {"success": False, "error": f"Instrument {symbol} not found."}
        last = float(instrument["last_price"])
        if order_type == "market":
            immediate = True
        elif side == "buy":
            immediate = float(limit_price) >= last
        else:
            immediate = float(limit_price) <= last
        price = last if immediate else float(limit_price)
        gross = round(quantity * price, 2)
        if side == "buy":
            total = round(gross + self.COMMISSION, 2)
        else:
            total = round(gross - self.COMMISSION, 2)
        buying_power = round(account["cash_balance"] - account["reserved_cash"], 2)
        available = 0
        for position in self.positions.values():
            if position.get("account_id") == account_id and position.get("symbol") == ticker:
                available = position["quantity"] - position.get("reserved_quantity", 0)
        feasible = total <= buying_power if side == "buy" else quantity <= available
        return {"success": True, "data": {
            "symbol": ticker, "side": side, "quantity": quantity, "last_price": last,
            "estimated_price": price, "fills_immediately": immediate, "estimated_total": total,
            "buying_power": buying_power, "available_shares": available,
            "feasible": bool(feasible) and account.get("status") == "active"
            and instrument.get("status") == "active"}}

    def open_account(self, owner_name: str, email: str,
                     account_type: Literal["individual", "joint", "retirement"],
                     initial_deposit: float = 0.0) -> dict:
        """Open a new active account, optionally funded with an initial deposit.

        The new id is "ACC-" followed by the next free four-digit number (ACC-0001, ACC-0002, ...).

        Args:
            owner_name (str): The account holder's full name.
            email (str): Contact email address (must contain "@").
            account_type (str): "individual", "joint" or "retirement".
            initial_deposit (float): Cash to deposit at opening (0 for none); the deposit limits
                apply.

        Returns:
            dict: {"success": True, "message": str, "data": {"account_id": str}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(owner_name, str) or not owner_name.strip():
            return {"success": False, "error": "owner_name must be a non-empty string."}
        if not isinstance(email, str) or "@" not in email:
            return {"success": False, "error": "email must be an email address."}
        if not isinstance(account_type, str) or account_type not in ("individual", "joint",
                                                                     "retirement"):
            return {"success": False,
                    "error": "account_type must be individual, joint or retirement."}
        if isinstance(initial_deposit, bool) or not isinstance(initial_deposit, (int, float)):
            return {"success": False, "error": "initial_deposit must be a number."}
        if initial_deposit < 0:
            return {"success": False, "error": "initial_deposit cannot be negative."}
        if initial_deposit > self.MAX_SINGLE_DEPOSIT:
            return {"success": False, "error": "A single deposit may not exceed 250000.00."}
        if account_type == "retirement" and initial_deposit > self.RETIREMENT_ANNUAL_DEPOSIT_LIMIT:
            return {"success": False, "error": "A retirement account takes at most 7000.00 of "
                    "deposits per calendar year."}
        number = len(self.accounts) + 1
        while f"ACC-{number:04d}" in self.accounts:
            number += 1
        account_id = f"ACC-{number:04d}"
        now = datetime.now()
        amount = round(float(initial_deposit), 2)
        self.accounts[account_id] = {
            "account_id": account_id, "owner_name": owner_name.strip(), "email": email.strip(),
            "account_type": account_type, "status": "active", "cash_balance": amount,
            "reserved_cash": 0.0, "opened_date": now.strftime("%Y-%m-%d")}
        if amount > 0:
            count = len(self.transactions) + 1
            while f"TXN-{count:04d}" in self.transactions:
                count += 1
            transaction_id = f"TXN-{count:04d}"
            self.transactions[transaction_id] = {
                "transaction_id": transaction_id, "account_id": account_id, "type": "deposit",
                "amount": amount, "balance_after": amount,
                "created_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "reference": "Initial deposit"}
        return {"success": True, "message": f"Account {account_id} opened for {owner_name.strip()}.",
                "data": {"account_id": account_id}}

    def deposit_cash(self, account_id: str, amount: float, reference: str = "") -> dict:
        """Deposit cash into an account (active or frozen).

        Args:
            account_id (str): The account id.
            amount (float): Amount to deposit, positive, at most 250,000.00; retirement accounts
                take at most 7,000.00 of deposits per calendar year.
            reference (str): Optional note, e.g. "Payroll transfer".

        Returns:
            dict: {"success": True, "message": str, "data": {"transaction_id", "cash_balance"}},
            or {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            return {"success": False, "error": "amount must be a number."}
        if not isinstance(reference, str):
            return {"success": False, "error": "reference must be a string."}
        if amount <= 0:
            return {"success": False, "error": "amount must be positive."}
        if amount > self.MAX_SINGLE_DEPOSIT:
            return {"success": False, "error": "A single deposit may not exceed 250000.00."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        if account.get("status") == "closed":
            return {"success": False, "error": f"Account {account_id} is closed."}
        now = datetime.now()
        amount = round(float(amount), 2)
        if account.get("account_type") == "retirement":
            year = now.strftime("%Y")
            this_year = sum(entry["amount"] for entry in self.transactions.values()
                            if entry.get("account_id") == account_id
                            and entry.get("type") == "deposit"
                            and str(entry.get("created_at", "")).startswith(year))
            if this_year + amount > self.RETIREMENT_ANNUAL_DEPOSIT_LIMIT + 1e-9:
                room = round(max(self.RETIREMENT_ANNUAL_DEPOSIT_LIMIT - this_year, 0.0), 2)
                return {"success": False, "error": f"Retirement account {account_id} can take "
                        f"only {room:.2f} more in deposits in {year}."}
        account["cash_balance"] = round(account["cash_balance"] + amount, 2)
        number = len(self.transactions) + 1
        while f"TXN-{number:04d}" in self.transactions:
            number += 1
        transaction_id = f"TXN-{number:04d}"
        self.transactions[transaction_id] = {
            "transaction_id": transaction_id, "account_id": account_id, "type": "deposit",
            "amount": amount, "balance_after": account["cash_balance"],
            "created_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "reference": reference.strip()}
        return {"success": True, "message": f"Deposited {amount:.2f} into {account_id}.",
                "data": {"transaction_id": transaction_id,
                         "cash_balance": account["cash_balance"]}}

    def withdraw_cash(self, account_id: str, amount: float, reference: str = "") -> dict:
        """Withdraw cash from an active, non-retirement account, within its buying power.

        Args:
            account_id (str): The account id.
            amount (float): Amount to withdraw, positive.
            reference (str): Optional note, e.g. "Transfer to checking".

        Returns:
            dict: {"success": True, "message": str, "data": {"transaction_id", "cash_balance"}},
            or {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            return {"success": False, "error": "amount must be a number."}
        if not isinstance(reference, str):
            return {"success": False, "error": "reference must be a string."}
        if amount <= 0:
            return {"success": False, "error": "amount must be positive."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        if account.get("status") != "active":
            return {"success": False, "error": f"Account {account_id} is {account.get('status')}; "
                    "withdrawals need an active account."}
        if account.get("account_type") == "retirement":
            return {"success": False, "error": "Cash cannot be withdrawn from a retirement account."}
        amount = round(float(amount), 2)
        buying_power = round(account["cash_balance"] - account["reserved_cash"], 2)
        if amount > buying_power:
            return {"success": False, "error": f"Withdrawal of {amount:.2f} exceeds the buying "
                    f"power of {buying_power:.2f}."}
        account["cash_balance"] = round(account["cash_balance"] - amount, 2)
        number = len(self.transactions) + 1
        while f"TXN-{number:04d}" in self.transactions:
            number += 1
        transaction_id = f"TXN-{number:04d}"
        self.transactions[transaction_id] = {
            "transaction_id": transaction_id, "account_id": account_id, "type": "withdrawal",
            "amount": amount, "balance_after": account["cash_balance"],
            "created_at": datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "reference": reference.strip()}
        return {"success": True, "message": f"Withdrew {amount:.2f} from {account_id}.",
                "data": {"transaction_id": transaction_id,
                         "cash_balance": account["cash_balance"]}}

    def place_order(self, account_id: str, symbol: str, side: Literal["buy", "sell"],
                    quantity: int, order_type: Literal["market", "limit"] = "market",
                    limit_price: Optional[float] = None) -> dict:
        """Place a buy or sell order. Market orders, and limit orders that are already marketable,
        fill at once at the last price (plus a 4.95 commission); other limit orders rest open and
        reserve cash (buy) or shares (sell).

        The new id is "ORD-" followed by the next free four-digit number.

        Args:
            account_id (str): The account id (must be active).
            symbol (str): The ticker symbol (instrument must be active).
            side (str): "buy" or "sell".
            quantity (int): Number of shares, 1-10,000.
            order_type (str): "market" (default) or "limit".
            limit_price (Optional[float]): Limit price per share; required for limit orders only.

        Returns:
            dict: {"success": True, "message": str, "data": {"order_id", "status",
            "filled_price"}}, or {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if not isinstance(symbol, str) or not symbol.strip():
            return {"success": False, "error": "symbol must be a non-empty string."}
        if not isinstance(side, str) or side not in ("buy", "sell"):
            return {"success": False, "error": "side must be buy or sell."}
        if isinstance(quantity, bool) or not isinstance(quantity, int):
            return {"success": False, "error": "quantity must be an integer."}
        if not isinstance(order_type, str) or order_type not in ("market", "limit"):
            return {"success": False, "error": "order_type must be market or limit."}
        if limit_price is not None and (isinstance(limit_price, bool)
                                        or not isinstance(limit_price, (int, float))):
            return {"success": False, "error": "limit_price must be a number."}
        if quantity < 1 or quantity > self.MAX_ORDER_QUANTITY:
            return {"success": False, "error": "quantity must be between 1 and 10000 shares."}
        if order_type == "limit" and (limit_price is None or limit_price <= 0):
            return {"success": False, "error": "A limit order needs a positive limit_price."}
        if order_type == "market" and limit_price is not None:
            return {"success": False, "error": "A market order takes no limit_price."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        if account.get("status") != "active":
            return {"success": False,
                    "error": f"Account {account_id} is {account.get('status')} and cannot trade."}
        ticker = symbol.strip().upper()
        instrument = self.instruments.get(ticker)
        if instrument is None:
            return {"success": False, "error": f"Instrument {symbol} not found."}
        if instrument.get("status") != "active":
            return {"success": False, "error": f"Trading in {ticker} is halted."}
        last = float(instrument["last_price"])
        limit = round(float(limit_price), 2) if limit_price is not None else None
        if order_type == "market":
            immediate = True
        elif side == "buy":
            immediate = limit >= last
        else:
            immediate = limit <= last
        position = None
        for candidate in self.positions.values():
            if candidate.get("account_id") == account_id and candidate.get("symbol") == ticker:
                position = candidate
        buying_power = round(account["cash_balance"] - account["reserved_cash"], 2)
        if side == "buy":
            price = last if immediate else limit
            needed = round(quantity * price + self.COMMISSION, 2)
            if needed > buying_power:
                return {"success": False, "error": f"Insufficient buying power: the order needs "
                        f"{needed:.2f}, the account has {buying_power:.2f}."}
        else:
            available = 0 if position is None else \
                position["quantity"] - position.get("reserved_quantity", 0)
            if quantity > available:
                return {"success": False, "error": f"Cannot sell {quantity} {ticker}: only "
                        f"{available} shares are available (no short selling)."}
        number = len(self.orders) + 1
        while f"ORD-{number:04d}" in self.orders:
            number += 1
        order_id = f"ORD-{number:04d}"
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        order = {"order_id": order_id, "account_id": account_id, "symbol": ticker, "side": side,
                 "order_type": order_type, "quantity": quantity, "limit_price": limit,
                 "status": "open", "filled_price": None, "commission": 0.0,
                 "created_at": stamp, "updated_at": stamp}
        self.orders[order_id] = order
        if not immediate:
            if side == "buy":
                account["reserved_cash"] = round(account["reserved_cash"]
                                                 + quantity * limit + self.COMMISSION, 2)
            else:
                position["reserved_quantity"] = position.get("reserved_quantity", 0) + quantity
            return {"success": True, "message": f"Limit order {order_id} is open: {side} "
                    f"{quantity} {ticker} at {limit:.2f}.",
                    "data": {"order_id": order_id, "status": "open", "filled_price": None}}
        gross = round(quantity * last, 2)
        if side == "buy":
            amount = round(gross + self.COMMISSION, 2)
            account["cash_balance"] = round(account["cash_balance"] - amount, 2)
            if position is None:
                count = len(self.positions) + 1
                while f"POS-{count:04d}" in self.positions:
                    count += 1
                position_id = f"POS-{count:04d}"
                self.positions[position_id] = {
                    "position_id": position_id, "account_id": account_id, "symbol": ticker,
                    "quantity": quantity, "reserved_quantity": 0, "average_cost": last}
            else:
                total_shares = position["quantity"] + quantity
                cost = position["quantity"] * position["average_cost"] + gross
                position["quantity"] = total_shares
                position["average_cost"] = round(cost / total_shares, 4)
        else:
            amount = round(gross - self.COMMISSION, 2)
            account["cash_balance"] = round(account["cash_balance"] + amount, 2)
            position["quantity"] = position["quantity"] - quantity
        order["status"] = "filled"
        order["filled_price"] = last
        order["commission"] = self.COMMISSION
        number = len(self.transactions) + 1
        while f"TXN-{number:04d}" in self.transactions:
            number += 1
        transaction_id = f"TXN-{number:04d}"
        self.transactions[transaction_id] = {
            "transaction_id": transaction_id, "account_id": account_id, "type": side,
            "amount": amount, "balance_after": account["cash_balance"], "created_at": stamp,
            "reference": order_id}
        return {"success": True, "message": f"Order {order_id} filled: {side} {quantity} {ticker} "
                f"at {last:.2f}.",
                "data": {"order_id": order_id, "status": "filled", "filled_price": last}}

    def cancel_order(self, order_id: str) -> dict:
        """Cancel an open order and release the cash or shares it reserved.

        Args:
            order_id (str): The order id.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not order_id.strip():
            return {"success": False, "error": "order_id must be a non-empty string."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order.get("status") != "open":
            return {"success": False, "error": f"Order {order_id} is {order.get('status')}; only "
                    "open orders can be cancelled."}
        account = self.accounts.get(order["account_id"])
        if account is None:
            return {"success": False, "error": f"Account {order['account_id']} not found."}
        if account.get("status") == "closed":
            return {"success": False, "error": f"Account {order['account_id']} is closed."}
        if order["side"] == "buy":
            release = round(order["quantity"] * float(order["limit_price"] or 0.0)
                            + self.COMMISSION, 2)
            account["reserved_cash"] = round(max(account["reserved_cash"] - release, 0.0), 2)
        else:
            for position in self.positions.values():
                if position.get("account_id") == order["account_id"] and \
                        position.get("symbol") == order["symbol"]:
                    position["reserved_quantity"] = max(
                        position.get("reserved_quantity", 0) - order["quantity"], 0)
        order["status"] = "cancelled"
        order["updated_at"] = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"success": True, "message": f"Order {order_id} cancelled."}

    def amend_order(self, order_id: str, new_limit_price: Optional[float] = None,
                    new_quantity: Optional[int] = None) -> dict:
        """Change the limit price and/or quantity of an open limit order. The reservation is
        re-checked; if the amended order has become marketable it fills at once at the last price.

        Args:
            order_id (str): The open limit order's id.
            new_limit_price (Optional[float]): The new limit price (positive); None keeps it.
            new_quantity (Optional[int]): The new number of shares (1-10,000); None keeps it.

        Returns:
            dict: {"success": True, "message": str, "data": {"order_id", "status"}}, or
            {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not order_id.strip():
            return {"success": False, "error": "order_id must be a non-empty string."}
        if new_limit_price is not None and (isinstance(new_limit_price, bool)
                                            or not isinstance(new_limit_price, (int, float))):
            return {"success": False, "error": "new_limit_price must be a number."}
        if new_quantity is not None and (isinstance(new_quantity, bool)
                                         or not isinstance(new_quantity, int)):
            return {"success": False, "error": "new_quantity must be an integer."}
        if new_limit_price is None and new_quantity is None:
            return {"success": False, "error": "Give a new limit price, a new quantity or both."}
        if new_limit_price is not None and new_limit_price <= 0:
            return {"success": False, "error": "new_limit_price must be positive."}
        if new_quantity is not None and (new_quantity < 1 or new_quantity > self.MAX_ORDER_QUANTITY):
            return {"success": False, "error": "new_quantity must be between 1 and 10000 shares."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order.get("status") != "open" or order.get("order_type") != "limit":
            return {"success": False, "error": f"Order {order_id} is not an open limit order."}
        account = self.accounts.get(order["account_id"])
        if account is None or account.get("status") != "active":
            return {"success": False, "error": f"Account {order['account_id']} is not active."}
        instrument = self.instruments.get(order["symbol"])
        if instrument is None or instrument.get("status") != "active":
            return {"success": False, "error": f"Trading in {order['symbol']} is halted."}
        last = float(instrument["last_price"])
        limit = round(float(new_limit_price), 2) if new_limit_price is not None \
            else float(order["limit_price"])
        quantity = new_quantity if new_quantity is not None else order["quantity"]
        position = None
        for candidate in self.positions.values():
            if candidate.get("account_id") == order["account_id"] and \
                    candidate.get("symbol") == order["symbol"]:
                position = candidate
        immediate = limit >= last if order["side"] == "buy" else limit <= last
        if order["side"] == "buy":
            old_reserve = round(order["quantity"] * float(order["limit_price"]) + self.COMMISSION, 2)
            free = round(account["cash_balance"] - account["reserved_cash"] + old_reserve, 2)
            price = last if immediate else limit
            needed = round(quantity * price + self.COMMISSION, 2)
            if needed > free:
                return {"success": False, "error": f"Insufficient buying power: the amended order "
                        f"needs {needed:.2f}, the account has {free:.2f}."}
            account["reserved_cash"] = round(max(account["reserved_cash"] - old_reserve, 0.0), 2)
        else:
            held = 0 if position is None else position["quantity"]
            other = 0 if position is None else \
                position.get("reserved_quantity", 0) - order["quantity"]
            if quantity > held - other:
                return {"success": False, "error": f"Cannot sell {quantity} {order['symbol']}: "
                        f"only {held - other} shares are available."}
            position["reserved_quantity"] = max(other, 0)
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        order["limit_price"] = limit
        order["quantity"] = quantity
        order["updated_at"] = stamp
        if not immediate:
            if order["side"] == "buy":
                account["reserved_cash"] = round(account["reserved_cash"]
                                                 + quantity * limit + self.COMMISSION, 2)
            else:
                position["reserved_quantity"] = position.get("reserved_quantity", 0) + quantity
            return {"success": True, "message": f"Order {order_id} amended: {quantity} shares at "
                    f"{limit:.2f}.", "data": {"order_id": order_id, "status": "open"}}
        gross = round(quantity * last, 2)
        if order["side"] == "buy":
            amount = round(gross + self.COMMISSION, 2)
            account["cash_balance"] = round(account["cash_balance"] - amount, 2)
            if position is None:
                count = len(self.positions) + 1
                while f"POS-{count:04d}" in self.positions:
                    count += 1
                position_id = f"POS-{count:04d}"
                self.positions[position_id] = {
                    "position_id": position_id, "account_id": order["account_id"],
                    "symbol": order["symbol"], "quantity": quantity, "reserved_quantity": 0,
                    "average_cost": last}
            else:
                total_shares = position["quantity"] + quantity
                cost = position["quantity"] * position["average_cost"] + gross
                position["quantity"] = total_shares
                position["average_cost"] = round(cost / total_shares, 4)
        else:
            amount = round(gross - self.COMMISSION, 2)
            account["cash_balance"] = round(account["cash_balance"] + amount, 2)
            position["quantity"] = position["quantity"] - quantity
        order["status"] = "filled"
        order["filled_price"] = last
        order["commission"] = self.COMMISSION
        number = len(self.transactions) + 1
        while f"TXN-{number:04d}" in self.transactions:
            number += 1
        transaction_id = f"TXN-{number:04d}"
        self.transactions[transaction_id] = {
            "transaction_id": transaction_id, "account_id": order["account_id"],
            "type": order["side"], "amount": amount, "balance_after": account["cash_balance"],
            "created_at": stamp, "reference": order_id}
        return {"success": True, "message": f"Order {order_id} amended and filled at {last:.2f}.",
                "data": {"order_id": order_id, "status": "filled"}}

    def update_instrument_price(self, symbol: str, new_price: float) -> dict:
        """Record a new last price for an instrument (market data feed). Unless the instrument is
        halted, the open limit orders the new price crosses fill at that price, oldest first.

        Args:
            symbol (str): The ticker symbol.
            new_price (float): The new last price, positive.

        Returns:
            dict: {"success": True, "message": str, "data": {"symbol", "last_price",
            "filled_orders": [order ids]}}, or {"success": False, "error": str}.
        """
        if not isinstance(symbol, str) or not symbol.strip():
            return {"success": False, "error": "symbol must be a non-empty string."}
        if isinstance(new_price, bool) or not isinstance(new_price, (int, float)):
            return {"success": False, "error": "new_price must be a number."}
        if new_price <= 0:
            return {"success": False, "error": "new_price must be positive."}
        ticker = symbol.strip().upper()
        instrument = self.instruments.get(ticker)
        if instrument is None:
            return {"success": False, "error": f"Instrument {symbol} not found."}
        price = round(float(new_price), 2)
        instrument["last_price"] = price
        filled = []
        if instrument.get("status") == "active":
            crossing = [order for order in self.orders.values()
                        if order.get("symbol") == ticker and order.get("status") == "open"
                        and order.get("order_type") == "limit"
                        and ((order["side"] == "buy" and float(order["limit_price"]) >= price)
                             or (order["side"] == "sell" and float(order["limit_price"]) <= price))]
            crossing.sort(key=lambda order: (order.get("created_at", ""), order["order_id"]))
            stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
            for order in crossing:
                account = self.accounts.get(order["account_id"])
                if account is None:
                    continue
                position = None
                for candidate in self.positions.values():
                    if candidate.get("account_id") == order["account_id"] and \
                            candidate.get("symbol") == ticker:
                        position = candidate
                gross = round(order["quantity"] * price, 2)
                if order["side"] == "buy":
                    reserve = round(order["quantity"] * float(order["limit_price"])
                                    + self.COMMISSION, 2)
                    account["reserved_cash"] = round(max(account["reserved_cash"] - reserve, 0.0), 2)
                    amount = round(gross + self.COMMISSION, 2)
                    account["cash_balance"] = round(account["cash_balance"] - amount, 2)
                    if position is None:
                        count = len(self.positions) + 1
                        while f"POS-{count:04d}" in self.positions:
                            count += 1
                        position_id = f"POS-{count:04d}"
                        self.positions[position_id] = {
                            "position_id": position_id, "account_id": order["account_id"],
                            "symbol": ticker, "quantity": order["quantity"],
                            "reserved_quantity": 0, "average_cost": price}
                    else:
                        total_shares = position["quantity"] + order["quantity"]
                        cost = position["quantity"] * position["average_cost"] + gross
                        position["quantity"] = total_shares
                        position["average_cost"] = round(cost / total_shares, 4)
                else:
                    if position is None:
                        continue
                    position["reserved_quantity"] = max(
                        position.get("reserved_quantity", 0) - order["quantity"], 0)
                    position["quantity"] = position["quantity"] - order["quantity"]
                    amount = round(gross - self.COMMISSION, 2)
                    account["cash_balance"] = round(account["cash_balance"] + amount, 2)
                order["status"] = "filled"
                order["filled_price"] = price
                order["commission"] = self.COMMISSION
                order["updated_at"] = stamp
                number = len(self.transactions) + 1
                while f"TXN-{number:04d}" in self.transactions:
                    number += 1
                transaction_id = f"TXN-{number:04d}"
                self.transactions[transaction_id] = {
                    "transaction_id": transaction_id, "account_id": order["account_id"],
                    "type": order["side"], "amount": amount,
                    "balance_after": account["cash_balance"], "created_at": stamp,
                    "reference": order["order_id"]}
                filled.append(order["order_id"])
        return {"success": True, "message": f"{ticker} last price set to {price:.2f}; "
                f"{len(filled)} open order(s) filled.",
                "data": {"symbol": ticker, "last_price": price, "filled_orders": filled}}

    def set_instrument_status(self, symbol: str, status: Literal["active", "halted"],
                              reason: str = "") -> dict:
        """Halt trading in an instrument or resume it. Open orders stay open while halted.

        Args:
            symbol (str): The ticker symbol.
            status (str): "active" or "halted".
            reason (str): Optional reason, e.g. "News pending".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(symbol, str) or not symbol.strip():
            return {"success": False, "error": "symbol must be a non-empty string."}
        if not isinstance(status, str) or status not in ("active", "halted"):
            return {"success": False, "error": "status must be active or halted."}
        if not isinstance(reason, str):
            return {"success": False, "error": "reason must be a string."}
        ticker = symbol.strip().upper()
        instrument = self.instruments.get(ticker)
        if instrument is None:
            return {"success": False, "error": f"Instrument {symbol} not found."}
        if instrument.get("status") == status:
            return {"success": False, "error": f"{ticker} is already {status}."}
        instrument["status"] = status
        note = f" ({reason.strip()})" if reason.strip() else ""
        return {"success": True, "message": f"{ticker} is now {status}{note}."}

    def set_account_status(self, account_id: str, status: Literal["active", "frozen"],
                           reason: str) -> dict:
        """Freeze an account or lift a freeze. Closed accounts cannot be changed.

        Args:
            account_id (str): The account id.
            status (str): "active" or "frozen".
            reason (str): Why the status changes, e.g. "Suspicious login reported".

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        if not isinstance(status, str) or status not in ("active", "frozen"):
            return {"success": False, "error": "status must be active or frozen."}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "reason must be a non-empty string."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        if account.get("status") == "closed":
            return {"success": False, "error": f"Account {account_id} is closed."}
        if account.get("status") == status:
            return {"success": False, "error": f"Account {account_id} is already {status}."}
        account["status"] = status
        return {"success": True, "message": f"Account {account_id} is now {status}: "
                f"{reason.strip()}."}

    def close_account(self, account_id: str) -> dict:
        """Close an account that holds no shares, has no open orders and has zero cash.

        Args:
            account_id (str): The account id.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(account_id, str) or not account_id.strip():
            return {"success": False, "error": "account_id must be a non-empty string."}
        account = self.accounts.get(account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found."}
        if account.get("status") == "closed":
            return {"success": False, "error": f"Account {account_id} is already closed."}
        held = sorted(position["symbol"] for position in self.positions.values()
                      if position.get("account_id") == account_id and position.get("quantity", 0) > 0)
        if held:
            return {"success": False, "error": f"Account {account_id} still holds shares of "
                    f"{', '.join(held)}."}
        open_orders = sorted(order_id for order_id, order in self.orders.items()
                             if order.get("account_id") == account_id
                             and order.get("status") == "open")
        if open_orders:
            return {"success": False, "error": f"Account {account_id} has open orders: "
                    f"{', '.join(open_orders)}."}
        if abs(account.get("cash_balance", 0.0)) > 0.001:
            return {"success": False, "error": f"Account {account_id} still has a cash balance of "
                    f"{account['cash_balance']:.2f}; withdraw it first."}
        account["status"] = "closed"
        return {"success": True, "message": f"Account {account_id} closed."}
