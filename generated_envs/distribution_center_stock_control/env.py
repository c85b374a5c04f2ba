from datetime import datetime
from typing import Dict, List, Optional, TypedDict


class SkuInfo(TypedDict):
    sku_id: str
    name: str
    category: str
    unit_cost: float
    reorder_point: int  # network-wide units at or below which the SKU needs reordering
    reorder_quantity: int  # units ordered from the supplier in one replenishment
    status: str  # "active" | "discontinued"


class WarehouseInfo(TypedDict):
    warehouse_id: str
    name: str
    city: str
    status: str  # "active" | "closed"


class BinInfo(TypedDict):
    bin_id: str
    warehouse_id: str
    zone: str
    capacity: int  # total units the bin can hold
    contents: Dict[str, int]  # sku_id -> units, only positive counts
    status: str  # "active" | "blocked"


class ReceiptInfo(TypedDict):
    receipt_id: str
    po_number: str
    supplier: str
    warehouse_id: str
    sku_id: str
    expected_quantity: int
    received_quantity: int
    bin_id: Optional[str]  # where the goods were put away
    expected_date: str  # ISO date
    received_at: Optional[str]  # ISO date-time
    status: str  # "expected" | "received"


class OrderLineInfo(TypedDict):
    sku_id: str
    quantity: int
    picked_quantity: int


class OrderInfo(TypedDict):
    order_id: str
    customer: str
    warehouse_id: str
    lines: List[OrderLineInfo]
    status: str  # "open" | "picking" | "picked" | "shipped" | "cancelled"
    created_at: str  # ISO date-time
    shipped_at: Optional[str]
    carrier: Optional[str]
    tracking_number: Optional[str]
    cancel_reason: Optional[str]


class TransferInfo(TypedDict):
    transfer_id: str
    sku_id: str
    quantity: int
    from_warehouse_id: str
    from_bin_id: str
    to_warehouse_id: str
    to_bin_id: Optional[str]  # set when received
    status: str  # "in_transit" | "received"
    created_at: str  # ISO date-time
    received_at: Optional[str]


class DistributionStockControl:
    MAX_ORDER_LINES = 10

    def __init__(self, init_config: dict):
        # Stock-keeping units, by sku_id.
        self.skus: Dict[str, SkuInfo] = {}
        # Warehouses of the network, by warehouse_id.
        self.warehouses: Dict[str, WarehouseInfo] = {}
        # Storage bins with their contents, by bin_id.
        self.bins: Dict[str, BinInfo] = {}
        # Inbound receipts (supplier deliveries), by receipt_id.
        self.receipts: Dict[str, ReceiptInfo] = {}
        # Outbound customer orders, by order_id.
        self.orders: Dict[str, OrderInfo] = {}
        # Stock transfers between warehouses, by transfer_id.
        self.transfers: Dict[str, TransferInfo] = {}
        self.init_config = init_config

        # Constraint rules:
        # - Every bin belongs to an existing warehouse; its contents map SKU ids to positive unit
        #   counts whose total never exceeds the bin's capacity.
        # - Stock is only put into or taken from active bins of active warehouses.
        # - Discontinued SKUs cannot be put on new receipts or outbound order lines.
        # - A receipt is received once, while "expected", into an active bin of its own warehouse
        #   with room; 1 to expected_quantity units (short deliveries are allowed).
        # - Outbound orders are created "open" in an active warehouse with a unique order number;
        #   lines (at most MAX_ORDER_LINES, one per SKU) are added only while open. Picking takes
        #   units from a bin of the order's warehouse, never more than the line still needs or the
        #   bin holds; the first pick makes the order "picking", the last one "picked". Only
        #   picked orders ship, and only open orders (nothing picked) can be cancelled.
        # - Transfers move stock between two different active warehouses: units leave the source
        #   bin at once ("in_transit") and land in an active bin of the destination with room
        #   when received.
        # - A SKU needs reordering when its units on hand in all bins plus the units on expected
        #   receipts are at or below its reorder point.
        # - A stock count sets a bin's units of a SKU to the counted quantity (0 removes it),
        #   within the bin's capacity.

    def get_sku(self, sku_id: str) -> dict:
        """Get a SKU with its units on hand in all warehouses and units on expected receipts.

        Args:
            sku_id (str): The SKU id, e.g. "SKU-1001".

        Returns:
            dict: {"success": True, "data": SkuInfo plus "on_hand" and "inbound_expected"}, or
            {"success": False, "error": str}.
        """
        if not isinstance(sku_id, str) or not sku_id.strip():
            return {"success": False, "error": "sku_id must be a non-empty string."}
        sku = self.skus.get(sku_id)
        if sku is None:
            return {"success": False, "error": f"SKU {sku_id} not found."}
        data = dict(sku)
        data["on_hand"] = sum(b["contents"].get(sku_id, 0) for b in self.bins.values())
        data["inbound_expected"] = sum(r["expected_quantity"] for r in self.receipts.values()
                                       if r["sku_id"] == sku_id and r["status"] == "expected")
        return {"success": True, "data": data}

    def search_skus(self, query: str, category: Optional[str] = None) -> dict:
        """Find SKUs whose id or name contains the text (case-insensitive), optionally in one
        category.

        Args:
            query (str): Text to look for, e.g. "pallet wrap".
            category (Optional[str]): Only SKUs of this category (case-insensitive).

        Returns:
            dict: {"success": True, "data": [SkuInfo, ...]} sorted by id, or
            {"success": False, "error": str}.
        """
        if not isinstance(query, str) or not query.strip():
            return {"success": False, "error": "query must be a non-empty string."}
        if category is not None and not isinstance(category, str):
            return {"success": False, "error": "category must be a string or null."}
        needle = query.strip().lower()
        found = []
        for sku_id in sorted(self.skus):
            sku = self.skus[sku_id]
            if needle not in sku["name"].lower() and needle not in sku_id.lower():
                continue
            if category is not None and sku["category"].lower() != category.strip().lower():
                continue
            found.append(dict(sku))
        return {"success": True, "data": found}

    def list_warehouses(self, status: Optional[str] = None) -> dict:
        """List warehouses with their number of bins and units stored, optionally of one status.

        Args:
            status (Optional[str]): "active" or "closed"; all when omitted.

        Returns:
            dict: {"success": True, "data": [WarehouseInfo plus "bins" and "units"]} sorted by
            id, or {"success": False, "error": str}.
        """
        if status is not None and not isinstance(status, str):
            return {"success": False, "error": "status must be a string or null."}
        if status is not None and status not in ("active", "closed"):
            return {"success": False, "error": "status must be 'active' or 'closed'."}
        found = []
        for warehouse_id in sorted(self.warehouses):
            warehouse = self.warehouses[warehouse_id]
            if status is not None and warehouse["status"] != status:
                continue
            own = [b for b in self.bins.values() if b["warehouse_id"] == warehouse_id]
            entry = dict(warehouse)
            entry["bins"] = len(own)
            entry["units"] = sum(sum(b["contents"].values()) for b in own)
            found.append(entry)
        return {"success": True, "data": found}

    def list_bins(self, warehouse_id: str, zone: Optional[str] = None) -> dict:
        """List the bins of a warehouse with their contents, units used and free space.

        Args:
            warehouse_id (str): The warehouse id, e.g. "WH-DAL".
            zone (Optional[str]): Only bins of this zone, e.g. "A".

        Returns:
            dict: {"success": True, "data": [BinInfo plus "used" and "free"]} sorted by id, or
            {"success": False, "error": str}.
        """
        if not isinstance(warehouse_id, str) or not warehouse_id.strip():
            return {"success": False, "error": "warehouse_id must be a non-empty string."}
        if zone is not None and not isinstance(zone, str):
            return {"success": False, "error": "zone must be a string or null."}
        if warehouse_id not in self.warehouses:
            return {"success": False, "error": f"Warehouse {warehouse_id} not found."}
        found = []
        for bin_id in sorted(self.bins):
            record = self.bins[bin_id]
            if record["warehouse_id"] != warehouse_id:
                continue
            if zone is not None and record["zone"].lower() != zone.strip().lower():
                continue
            entry = dict(record)
            entry["contents"] = dict(record["contents"])
            entry["used"] = sum(record["contents"].values())
            entry["free"] = record["capacity"] - entry["used"]
            found.append(entry)
        return {"success": True, "data": found}

    def get_stock_level(self, sku_id: str, warehouse_id: Optional[str] = None) -> dict:
        """Get the units of a SKU per bin and per warehouse, with units expected and in transit.

        Args:
            sku_id (str): The SKU id.
            warehouse_id (Optional[str]): Only this warehouse; all when omitted.

        Returns:
            dict: {"success": True, "data": {"sku_id", "on_hand", "by_warehouse": {id: units},
            "bins": [{"bin_id", "warehouse_id", "zone", "quantity", "bin_status"}],
            "inbound_expected", "in_transit"}}, or {"success": False, "error": str}.
        """
        if not isinstance(sku_id, str) or not sku_id.strip():
            return {"success": False, "error": "sku_id must be a non-empty string."}
        if warehouse_id is not None and not isinstance(warehouse_id, str):
            return {"success": False, "error": "warehouse_id must be a string or null."}
        if sku_id not in self.skus:
            return {"success": False, "error": f"SKU {sku_id} not found."}
        if warehouse_id is not None and warehouse_id not in self.warehouses:
            return {"success": False, "error": f"Warehouse {warehouse_id} not found."}
        bins = []
        by_warehouse: Dict[str, int] = {}
        for bin_id in sorted(self.bins):
            record = self.bins[bin_id]
            quantity = record["contents"].get(sku_id, 0)
            if quantity <= 0 or (warehouse_id is not None and record["warehouse_id"] != warehouse_id):
                continue
            bins.append({"bin_id": bin_id, "warehouse_id": record["warehouse_id"], "zone": record["zone"],
                         "quantity": quantity, "bin_status": record["status"]})
            by_warehouse[record["warehouse_id"]] = by_warehouse.get(record["warehouse_id"], 0) + quantity
        inbound = sum(r["expected_quantity"] for r in self.receipts.values()
                      if r["sku_id"] == sku_id and r["status"] == "expected"
                      and (warehouse_id is None or r["warehouse_id"] == warehouse_id))
        in_transit = sum(t["quantity"] for t in self.transfers.values()
                         if t["sku_id"] == sku_id and t["status"] == "in_transit"
                         and (warehouse_id is None or t["to_warehouse_id"] == warehouse_id))
        return {"success": True, "data": {"sku_id": sku_id, "on_hand": sum(by_warehouse.values()),
                                          "by_warehouse": by_warehouse, "bins": bins,
                                          "inbound_expected": inbound, "in_transit": in_transit}}

    def list_low_stock_skus(self) -> dict:
        """List the active SKUs that need reordering: units on hand in all bins plus units on
        expected receipts at or below the reorder point.

        Returns:
            dict: {"success": True, "data": [{"sku_id", "name", "on_hand", "inbound_expected",
            "reorder_point", "reorder_quantity"}]} sorted by id.
        """
        found = []
        for sku_id in sorted(self.skus):
            sku = self.skus[sku_id]
            if sku["status"] != "active":
                continue
            on_hand = sum(b["contents"].get(sku_id, 0) for b in self.bins.values())
            inbound = sum(r["expected_quantity"] for r in self.receipts.values()
                          if r["sku_id"] == sku_id and r["status"] == "expected")
            if on_hand + inbound <= sku["reorder_point"]:
                found.append({"sku_id": sku_id, "name": sku["name"], "on_hand": on_hand,
                              "inbound_expected": inbound, "reorder_point": sku["reorder_point"],
                              "reorder_quantity": sku["reorder_quantity"]})
        return {"success": True, "data": found}

    def get_receipt(self, receipt_id: str) -> dict:
        """Get an inbound receipt by id.

        Args:
            receipt_id (str): The receipt id, e.g. "RCV-0004".

        Returns:
            dict: {"success": True, "data": ReceiptInfo}, or {"success": False, "error": str}.
        """
        if not isinstance(receipt_id, str) or not receipt_id.strip():
            return {"success": False, "error": "receipt_id must be a non-empty string."}
        receipt = self.receipts.get(receipt_id)
        if receipt is None:
            return {"success": False, "error": f"Receipt {receipt_id} not found."}
        return {"success": True, "data": dict(receipt)}

    def list_receipts(self, warehouse_id: Optional[str] = None, status: Optional[str] = None,
                      po_number: Optional[str] = None) -> dict:
        """List inbound receipts, filtered by warehouse, status and/or purchase order number.

        Args:
            warehouse_id (Optional[str]): Only receipts of this warehouse.
            status (Optional[str]): "expected" or "received".
            po_number (Optional[str]): Only receipts of this purchase order.

        Returns:
            dict: {"success": True, "data": [ReceiptInfo, ...]} sorted by expected date, or
            {"success": False, "error": str}.
        """
        for label, value in (("warehouse_id", warehouse_id), ("status", status), ("po_number", po_number)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in ("expected", "received"):
            return {"success": False, "error": "status must be 'expected' or 'received'."}
        found = [dict(r) for r in self.receipts.values()
                 if (warehouse_id is None or r["warehouse_id"] == warehouse_id)
                 and (status is None or r["status"] == status)
                 and (po_number is None or r["po_number"] == po_number)]
        found.sort(key=lambda r: (r["expected_date"], r["receipt_id"]))
        return {"success": True, "data": found}

    def get_order(self, order_id: str) -> dict:
        """Get an outbound order with the units each line still needs picked.

        Args:
            order_id (str): The order number, e.g. "SO-7731".

        Returns:
            dict: {"success": True, "data": OrderInfo with "remaining" on every line}, or
            {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not order_id.strip():
            return {"success": False, "error": "order_id must be a non-empty string."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        data = dict(order)
        data["lines"] = [dict(line, remaining=line["quantity"] - line["picked_quantity"])
                         for line in order["lines"]]
        return {"success": True, "data": data}

    def list_orders(self, warehouse_id: Optional[str] = None, status: Optional[str] = None,
                    customer: Optional[str] = None) -> dict:
        """List outbound orders, filtered by warehouse, status and/or customer name (substring).

        Args:
            warehouse_id (Optional[str]): Only orders shipping from this warehouse.
            status (Optional[str]): "open", "picking", "picked", "shipped" or "cancelled".
            customer (Optional[str]): Part of the customer's name (case-insensitive).

        Returns:
            dict: {"success": True, "data": [OrderInfo, ...]} sorted by creation time, or
            {"success": False, "error": str}.
        """
        for label, value in (("warehouse_id", warehouse_id), ("status", status), ("customer", customer)):
            if value is not None and not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string or null."}
        if status is not None and status not in ("open", "picking", "picked", "shipped", "cancelled"):
            return {"success": False, "error": "status must be open, picking, picked, shipped or cancelled."}
        found = []
        for order in self.orders.values():
            if warehouse_id is not None and order["warehouse_id"] != warehouse_id:
                continue
            if status is not None and order["status"] != status:
                continue
            if customer is not None and customer.strip().lower() not in order["customer"].lower():
                continue
            entry = dict(order)
            entry["lines"] = [dict(line) for line in order["lines"]]
            found.append(entry)
        found.sort(key=lambda order: (order["created_at"], order["order_id"]))
        return {"success": True, "data": found}

    def list_transfers(self, status: Optional[str] = None, warehouse_id: Optional[str] = None) -> dict:
        """List stock transfers, filtered by status and/or a warehouse they leave or reach.

        Args:
            status (Optional[str]): "in_transit" or "received".
            warehouse_id (Optional[str]): Only transfers from or to this warehouse.

        Returns:
            dict: {"success": True, "data": [TransferInfo, ...]} sorted by id, or
            {"success": False, "error": str}.
        """
        if status is not None and not isinstance(status, str):
            return {"success": False, "error": "status must be a string or null."}
        if warehouse_id is not None and not isinstance(warehouse_id, str):
            return {"success": False, "error": "warehouse_id must be a string or null."}
        if status is not None and status not in ("in_transit", "received"):
            return {"success": False, "error": "status must be 'in_transit' or 'received'."}
        found = []
        for transfer_id in sorted(self.transfers):
            transfer = self.transfers[transfer_id]
            if status is not None and transfer["status"] != status:
                continue
            if warehouse_id is not None and warehouse_id not in (transfer["from_warehouse_id"], transfer["to_warehouse_id"]):
                continue
            found.append(dict(transfer))
        return {"success": True, "data": found}

    def create_receipt(self, po_number: str, supplier: str, warehouse_id: str, sku_id: str,
                       expected_quantity: int, expected_date: str) -> dict:
        """Announce an expected supplier delivery of one SKU to a warehouse (e.g. a
        replenishment). Receipt ids are given in order: RCV-0001, RCV-0002, ... (the next free
        number after the count of receipts).

        Args:
            po_number (str): The purchase order number.
            supplier (str): The supplier's name.
            warehouse_id (str): The active warehouse that will receive the goods.
            sku_id (str): An active SKU.
            expected_quantity (int): Units expected, at least 1.
            expected_date (str): Delivery day (YYYY-MM-DD), not before today.

        Returns:
            dict: {"success": True, "message": str, "data": {"receipt_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("po_number", po_number), ("supplier", supplier), ("warehouse_id", warehouse_id),
                             ("sku_id", sku_id), ("expected_date", expected_date)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        if isinstance(expected_quantity, bool) or not isinstance(expected_quantity, int):
            return {"success": False, "error": "expected_quantity must be an integer."}
        if expected_quantity < 1:
            return {"success": False, "error": "expected_quantity must be at least 1."}
        warehouse = self.warehouses.get(warehouse_id)
        if warehouse is None or warehouse["status"] != "active":
            return {"success": False, "error": f"Warehouse {warehouse_id} is not an active warehouse."}
        sku = self.skus.get(sku_id)
        if sku is None:
            return {"success": False, "error": f"SKU {sku_id} not found."}
        if sku["status"] != "active":
            return {"success": False, "error": f"SKU {sku_id} is discontinued and cannot be reordered."}
        try:
            day = datetime.fromisoformat(expected_date.strip()).date()
        except ValueError:
            return {"success": False, "error": f"Invalid expected_date {expected_date!r}; use YYYY-MM-DD."}
        if day < datetime.now().date():
            return {"success": False, "error": "expected_date cannot be in the past."}
        number = len(self.receipts) + 1
        while f"RCV-{number:04d}" in self.receipts:
            number += 1
        receipt_id = f"RCV-{number:04d}"
        self.receipts[receipt_id] = {
            "receipt_id": receipt_id, "po_number": po_number.strip(), "supplier": supplier.strip(),
            "warehouse_id": warehouse_id, "sku_id": sku_id, "expected_quantity": expected_quantity,
            "received_quantity": 0, "bin_id": None, "expected_date": day.isoformat(),
            "received_at": None, "status": "expected"}
        return {"success": True, "message": f"Receipt {receipt_id} expected on {day.isoformat()}.",
                "data": {"receipt_id": receipt_id}}

    def receive_receipt(self, receipt_id: str, received_quantity: int, bin_id: str) -> dict:
        """Receive an expected delivery and put the units away into one bin of the receipt's
        warehouse. A short delivery (fewer units than expected) is allowed; more is not.

        Args:
            receipt_id (str): The expected receipt.
            received_quantity (int): Units actually delivered, 1 to the expected quantity.
            bin_id (str): An active bin of the receipt's warehouse with enough free space.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(receipt_id, str) or not isinstance(bin_id, str):
            return {"success": False, "error": "receipt_id and bin_id must be strings."}
        if isinstance(received_quantity, bool) or not isinstance(received_quantity, int):
            return {"success": False, "error": "received_quantity must be an integer."}
        receipt = self.receipts.get(receipt_id)
        if receipt is None:
            return {"success": False, "error": f"Receipt {receipt_id} not found."}
        if receipt["status"] != "expected":
            return {"success": False, "error": f"Receipt {receipt_id} is {receipt['status']}, not expected."}
        if not 1 <= received_quantity <= receipt["expected_quantity"]:
            return {"success": False, "error": f"received_quantity must be between 1 and {receipt['expected_quantity']}."}
        warehouse = self.warehouses.get(receipt["warehouse_id"])
        if warehouse is None or warehouse["status"] != "active":
            return {"success": False, "error": f"Warehouse {receipt['warehouse_id']} is not active."}
        record = self.bins.get(bin_id)
        if record is None:
            return {"success": False, "error": f"Bin {bin_id} not found."}
        if record["warehouse_id"] != receipt["warehouse_id"]:
            return {"success": False, "error": f"Bin {bin_id} is not in warehouse {receipt['warehouse_id']}."}
        if record["status"] != "active":
            return {"success": False, "error": f"Bin {bin_id} is blocked."}
        free = record["capacity"] - sum(record["contents"].values())
        if received_quantity > free:
            return {"success": False, "error": f"Bin {bin_id} has room for {free} more units only."}
        sku_id = receipt["sku_id"]
        record["contents"][sku_id] = record["contents"].get(sku_id, 0) + received_quantity
        receipt["received_quantity"] = received_quantity
        receipt["bin_id"] = bin_id
        receipt["received_at"] = datetime.now().isoformat(timespec="seconds")
        receipt["status"] = "received"
        short = receipt["expected_quantity"] - received_quantity
        note = f" ({short} short)" if short else ""
        return {"success": True, "message": f"Received {received_quantity} units of {sku_id} into {bin_id}{note}."}

    def create_order(self, order_id: str, customer: str, warehouse_id: str) -> dict:
        """Open a new outbound order under the sales order number the customer was given.

        Args:
            order_id (str): The unique order number, e.g. "SO-7731".
            customer (str): The customer's name.
            warehouse_id (str): The active warehouse that will ship it.

        Returns:
            dict: {"success": True, "message": str, "data": {"order_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("order_id", order_id), ("customer", customer), ("warehouse_id", warehouse_id)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        order_id = order_id.strip()
        if order_id in self.orders:
            return {"success": False, "error": f"Order {order_id} already exists."}
        warehouse = self.warehouses.get(warehouse_id)
        if warehouse is None or warehouse["status"] != "active":
            return {"success": False, "error": f"Warehouse {warehouse_id} is not an active warehouse."}
        self.orders[order_id] = {
            "order_id": order_id, "customer": customer.strip(), "warehouse_id": warehouse_id,
            "lines": [], "status": "open", "created_at": datetime.now().isoformat(timespec="seconds"),
            "shipped_at": None, "carrier": None, "tracking_number": None, "cancel_reason": None}
        return {"success": True, "message": f"Order {order_id} opened.", "data": {"order_id": order_id}}

    def add_order_line(self, order_id: str, sku_id: str, quantity: int) -> dict:
        """Add units of an active SKU to an open order; a SKU already on the order gets the
        units added to its line.

        Args:
            order_id (str): The open order.
            sku_id (str): An active SKU.
            quantity (int): Units to add, at least 1.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not isinstance(sku_id, str):
            return {"success": False, "error": "order_id and sku_id must be strings."}
        if isinstance(quantity, bool) or not isinstance(quantity, int):
            return {"success": False, "error": "quantity must be an integer."}
        if quantity < 1:
            return {"success": False, "error": "quantity must be at least 1."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order["status"] != "open":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; lines can only be added while open."}
        sku = self.skus.get(sku_id)
        if sku is None:
            return {"success": False, "error": f"SKU {sku_id} not found."}
        if sku["status"] != "active":
            return {"success": False, "error": f"SKU {sku_id} is discontinued."}
        for line in order["lines"]:
            if line["sku_id"] == sku_id:
                line["quantity"] += quantity
                return {"success": True, "message": f"Order {order_id} now asks for {line['quantity']} units of {sku_id}."}
        if len(order["lines"]) >= self.MAX_ORDER_LINES:
            return {"success": False, "error": f"Order {order_id} already has {self.MAX_ORDER_LINES} lines."}
        order["lines"].append({"sku_id": sku_id, "quantity": quantity, "picked_quantity": 0})
        return {"success": True, "message": f"Added {quantity} units of {sku_id} to order {order_id}."}

    def pick_order_line(self, order_id: str, sku_id: str, bin_id: str, quantity: int) -> dict:
        """Pick units of an order line from one bin of the order's warehouse. A line can be
        picked from several bins in several calls.

        Args:
            order_id (str): An open or picking order.
            sku_id (str): The SKU of the line.
            bin_id (str): An active bin of the order's warehouse holding the SKU.
            quantity (int): Units to pick, at most what the line still needs and the bin holds.

        Returns:
            dict: {"success": True, "message": str, "data": {"remaining": int, "order_status": str}},
            or {"success": False, "error": str}.
        """
        for label, value in (("order_id", order_id), ("sku_id", sku_id), ("bin_id", bin_id)):
            if not isinstance(value, str):
                return {"success": False, "error": f"{label} must be a string."}
        if isinstance(quantity, bool) or not isinstance(quantity, int):
            return {"success": False, "error": "quantity must be an integer."}
        if quantity < 1:
            return {"success": False, "error": "quantity must be at least 1."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order["status"] not in ("open", "picking"):
            return {"success": False, "error": f"Order {order_id} is {order['status']}; it cannot be picked."}
        line = next((entry for entry in order["lines"] if entry["sku_id"] == sku_id), None)
        if line is None:
            return {"success": False, "error": f"Order {order_id} has no line for {sku_id}."}
        needed = line["quantity"] - line["picked_quantity"]
        if needed <= 0:
            return {"success": False, "error": f"The line for {sku_id} is already fully picked."}
        if quantity > needed:
            return {"success": False, "error": f"The line for {sku_id} needs only {needed} more units."}
        record = self.bins.get(bin_id)
        if record is None:
            return {"success": False, "error": f"Bin {bin_id} not found."}
        if record["warehouse_id"] != order["warehouse_id"]:
            return {"success": False, "error": f"Bin {bin_id} is not in warehouse {order['warehouse_id']}."}
        if record["status"] != "active":
            return {"success": False, "error": f"Bin {bin_id} is blocked."}
        warehouse = self.warehouses.get(order["warehouse_id"])
        if warehouse is None or warehouse["status"] != "active":
            return {"success": False, "error": f"Warehouse {order['warehouse_id']} is not active."}
        held = record["contents"].get(sku_id, 0)
        if quantity > held:
            return {"success": False, "error": f"Bin {bin_id} holds only {held} units of {sku_id}."}
        if held == quantity:
            del record["contents"][sku_id]
        else:
            record["contents"][sku_id] = held - quantity
        line["picked_quantity"] += quantity
        done = all(entry["picked_quantity"] >= entry["quantity"] for entry in order["lines"])
        order["status"] = "picked" if done else "picking"
        remaining = line["quantity"] - line["picked_quantity"]
        return {"success": True, "message": f"Picked {quantity} units of {sku_id} from {bin_id} for order {order_id}.",
                "data": {"remaining": remaining, "order_status": order["status"]}}

    def ship_order(self, order_id: str, carrier: str, tracking_number: str) -> dict:
        """Ship a fully picked order with a carrier and tracking number.

        Args:
            order_id (str): The picked order.
            carrier (str): The carrier, e.g. "UPS Freight".
            tracking_number (str): The carrier's tracking number.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        for label, value in (("order_id", order_id), ("carrier", carrier), ("tracking_number", tracking_number)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order["status"] != "picked":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only fully picked orders ship."}
        order["status"] = "shipped"
        order["carrier"] = carrier.strip()
        order["tracking_number"] = tracking_number.strip()
        order["shipped_at"] = datetime.now().isoformat(timespec="seconds")
        return {"success": True, "message": f"Order {order_id} shipped with {carrier.strip()}."}

    def cancel_order(self, order_id: str, reason: str) -> dict:
        """Cancel an open order on which nothing has been picked yet.

        Args:
            order_id (str): The open order.
            reason (str): Why it is cancelled.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(order_id, str) or not isinstance(reason, str):
            return {"success": False, "error": "order_id and reason must be strings."}
        if not reason.strip():
            return {"success": False, "error": "Give a reason for the cancellation."}
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found."}
        if order["status"] != "open":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only open orders can be cancelled."}
        order["status"] = "cancelled"
        order["cancel_reason"] = reason.strip()
        return {"success": True, "message": f"Order {order_id} cancelled."}

    def create_transfer(self, sku_id: str, from_bin_id: str, to_warehouse_id: str, quantity: int) -> dict:
        """Send units of a SKU from a bin to another warehouse; they leave the bin at once and
        stay in transit until received. Transfer ids are given in order: TRF-0001, TRF-0002, ...
        (the next free number after the count of transfers).

        Args:
            sku_id (str): The SKU to move.
            from_bin_id (str): An active bin of an active warehouse holding the units.
            to_warehouse_id (str): Another active warehouse.
            quantity (int): Units to send, at least 1 and at most what the bin holds.

        Returns:
            dict: {"success": True, "message": str, "data": {"transfer_id": str}}, or
            {"success": False, "error": str}.
        """
        for label, value in (("sku_id", sku_id), ("from_bin_id", from_bin_id), ("to_warehouse_id", to_warehouse_id)):
            if not isinstance(value, str) or not value.strip():
                return {"success": False, "error": f"{label} must be a non-empty string."}
        if isinstance(quantity, bool) or not isinstance(quantity, int):
            return {"success": False, "error": "quantity must be an integer."}
        if quantity < 1:
            return {"success": False, "error": "quantity must be at least 1."}
        if sku_id not in self.skus:
            return {"success": False, "error": f"SKU {sku_id} not found."}
        record = self.bins.get(from_bin_id)
        if record is None:
            return {"success": False, "error": f"Bin {from_bin_id} not found."}
        if record["status"] != "active":
            return {"success": False, "error": f"Bin {from_bin_id} is blocked."}
        source = self.warehouses.get(record["warehouse_id"])
        if source is None or source["status"] != "active":
            return {"success": False, "error": f"Warehouse {record['warehouse_id']} is not active."}
        target = self.warehouses.get(to_warehouse_id)
        if target is None or target["status"] != "active":
            return {"success": False, "error": f"Warehouse {to_warehouse_id} is not an active warehouse."}
        if to_warehouse_id == record["warehouse_id"]:
            return {"success": False, "error": "A transfer must go to another warehouse."}
        held = record["contents"].get(sku_id, 0)
        if quantity > held:
            return {"success": False, "error": f"Bin {from_bin_id} holds only {held} units of {sku_id}."}
        if held == quantity:
            del record["contents"][sku_id]
        else:
            record["contents"][sku_id] = held - quantity
        number = len(self.transfers) + 1
        while f"TRF-{number:04d}" in self.transfers:
            number += 1
        transfer_id = f"TRF-{number:04d}"
        self.transfers[transfer_id] = {
            "transfer_id": transfer_id, "sku_id": sku_id, "quantity": quantity,
            "from_warehouse_id": record["warehouse_id"], "from_bin_id": from_bin_id,
            "to_warehouse_id": to_warehouse_id, "to_bin_id": None, "status": "in_transit",
            "created_at": datetime.now().isoformat(timespec="seconds"), "received_at": None}
        return {"success": True, "message": f"Transfer {transfer_id} of {quantity} units of {sku_id} to {to_warehouse_id} is in transit.",
                "data": {"transfer_id": transfer_id}}

    def receive_transfer(self, transfer_id: str, to_bin_id: str) -> dict:
        """Receive an in-transit transfer into an active bin of the destination warehouse.

        Args:
            transfer_id (str): The in-transit transfer.
            to_bin_id (str): An active bin of the destination warehouse with enough free space.

        Returns:
            dict: {"success": True, "message": str}, or {"success": False, "error": str}.
        """
        if not isinstance(transfer_id, str) or not isinstance(to_bin_id, str):
            return {"success": False, "error": "transfer_id and to_bin_id must be strings."}
        transfer = self.transfers.get(transfer_id)
        if transfer is None:
            return {"success": False, "error": f"Transfer {transfer_id} not found."}
        if transfer["status"] != "in_transit":
            return {"success": False, "error": f"Transfer {transfer_id} is {transfer['status']}, not in transit."}
        record = self.bins.get(to_bin_id)
        if record is None:
            return {"success": False, "error": f"Bin {to_bin_id} not found."}
        if record["warehouse_id"] != transfer["to_warehouse_id"]:
            return {"success": False, "error": f"Bin {to_bin_id} is not in warehouse {transfer['to_warehouse_id']}."}
        if record["status"] != "active":
            return {"success": False, "error": f"Bin {to_bin_id} is blocked."}
        warehouse = self.warehouses.get(transfer["to_warehouse_id"])
        if warehouse is None or warehouse["status"] != "active":
            return {"success": False, "error": f"Warehouse {transfer['to_warehouse_id']} is not active."}
        free = record["capacity"] - sum(record["contents"].values())
        if transfer["quantity"] > free:
            return {"success": False, "error": f"Bin {to_bin_id} has room for {free} more units only."}
        sku_id = transfer["sku_id"]
        record["contents"][sku_id] = record["contents"].get(sku_id, 0) + transfer["quantity"]
        transfer["to_bin_id"] = to_bin_id
        transfer["status"] = "received"
        transfer["received_at"] = datetime.now().isoformat(timespec="seconds")
        return {"success": True, "message": f"Transfer {transfer_id} received into {to_bin_id}."}

    def adjust_stock(self, bin_id: str, sku_id: str, counted_quantity: int) -> dict:
        """Record a stock count: set the units of a SKU in a bin to the counted quantity (0
        removes the SKU from the bin). Works on blocked bins too, so damaged stock can be
        written off.

        Args:
            bin_id (str): The counted bin.
            sku_id (str): The counted SKU.
            counted_quantity (int): Units found, 0 or more, within the bin's capacity.

        Returns:
            dict: {"success": True, "message": str, "data": {"previous": int, "counted": int}},
            or {"success": False, "error": str}.
        """
        if not isinstance(bin_id, str) or not isinstance(sku_id, str):
            return {"success": False, "error": "bin_id and sku_id must be strings."}
        if isinstance(counted_quantity, bool) or not isinstance(counted_quantity, int):
            return {"success": False, "error": "counted_quantity must be an integer."}
        if counted_quantity < 0:
            return {"success": False, "error": "counted_quantity cannot be negative."}
        record = self.bins.get(bin_id)
        if record is None:
            return {"success": False, "error": f"Bin {bin_id} not found."}
        if sku_id not in self.skus:
            return {"success": False, "error": f"SKU {sku_id} not found."}
        previous = record["contents"].get(sku_id, 0)
        others = sum(record["contents"].values()) - previous
        if others + counted_quantity > record["capacity"]:
            return {"success": False, "error": f"Bin {bin_id} cannot hold {counted_quantity} units of {sku_id} (capacity {record['capacity']})."}
        if previous == counted_quantity:
            return {"success": False, "error": f"Bin {bin_id} already records {previous} units of {sku_id}; nothing to adjust."}
        if counted_quantity == 0:
            del record["contents"][sku_id]
        else:
            record["contents"][sku_id] = counted_quantity
        return {"success": True, "message": f"Bin {bin_id} now holds {counted_quantity} units of {sku_id} (was {previous}).",
                "data": {"previous": previous, "counted": counted_quantity}}
