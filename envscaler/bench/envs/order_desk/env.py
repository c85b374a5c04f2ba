from typing import Dict, List, Optional, TypedDict


class CustomerInfo(TypedDict):
    customer_id: str
    name: str
    email: str
    tier: str  # "standard" | "gold"


class ProductInfo(TypedDict):
    sku: str
    name: str
    price: float
    stock: int


class OrderItem(TypedDict):
    sku: str
    quantity: int
    unit_price: float


class OrderInfo(TypedDict):
    order_id: str
    customer_id: str
    status: str  # "placed" | "shipped" | "delivered" | "cancelled"
    items: List[OrderItem]
    total: float
    shipping_address: str
    created: str  # ISO date


class OrderDesk:
    """An order-management back office holding a whole shop's database: customers, products with
    their stock, and every order ever placed. Used by the benchmark at 1 to 30 MB of state."""

    def __init__(self, init_config: dict):
        # Customers by customer_id.
        self.customers: Dict[str, CustomerInfo] = {}
        # Products by sku, with units in stock.
        self.products: Dict[str, ProductInfo] = {}
        # Orders by order_id.
        self.orders: Dict[str, OrderInfo] = {}

        # Constraint rules:
        # - Only a "placed" order may be cancelled or have its shipping address changed.
        # - Cancelling an order puts its items back in stock.
        # - A shipping address must not be blank.

    def get_customer(self, customer_id: str) -> dict:
        """Look up a customer's profile and how many orders they have placed.

        Args:
            customer_id (str): The customer's id, e.g. "C-00042".

        Returns:
            dict: {"success": True, "data": CustomerInfo plus "orders"}, or
            {"success": False, "error": str}.
        """
        customer = self.customers.get(customer_id)
        if customer is None:
            return {"success": False, "error": "Customer not found."}
        orders = sum(1 for order in self.orders.values() if order["customer_id"] == customer_id)
        return {"success": True, "data": {**customer, "orders": orders}}

    def get_order(self, order_id: str) -> dict:
        """Read one order with its items.

        Args:
            order_id (str): The order's id, e.g. "O-000123".

        Returns:
            dict: {"success": True, "data": OrderInfo}, or {"success": False, "error": str}.
        """
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": "Order not found."}
        return {"success": True, "data": order}

    def list_customer_orders(self, customer_id: str, status: Optional[str] = None) -> dict:
        """List a customer's orders, newest first, optionally only those in one status.

        Args:
            customer_id (str): The customer's id.
            status (str): Only orders in this status ("placed", "shipped", "delivered",
                "cancelled"); all when omitted.

        Returns:
            dict: {"success": True, "data": List[OrderInfo]}.
        """
        if customer_id not in self.customers:
            return {"success": False, "error": "Customer not found."}
        orders = [order for order in self.orders.values() if order["customer_id"] == customer_id
                  and (status is None or order["status"] == status)]
        orders.sort(key=lambda order: (order["created"], order["order_id"]), reverse=True)
        return {"success": True, "data": orders}

    def get_product(self, sku: str) -> dict:
        """Read a product with its price and units in stock.

        Args:
            sku (str): The product's stock-keeping unit, e.g. "P-0007".

        Returns:
            dict: {"success": True, "data": ProductInfo}, or {"success": False, "error": str}.
        """
        product = self.products.get(sku)
        if product is None:
            return {"success": False, "error": "Product not found."}
        return {"success": True, "data": product}

    def cancel_order(self, order_id: str) -> dict:
        """Cancel a placed order and put its items back in stock.

        Args:
            order_id (str): The order to cancel.

        Returns:
            dict: {"success": True, "data": OrderInfo}, or {"success": False, "error": str}.
        """
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": "Order not found."}
        if order["status"] != "placed":
            return {"success": False, "error": f"Order {order_id} is {order['status']}."}
        for item in order["items"]:
            self.products[item["sku"]]["stock"] += item["quantity"]
        order["status"] = "cancelled"
        return {"success": True, "data": order}

    def update_shipping_address(self, order_id: str, shipping_address: str) -> dict:
        """Change where a placed order will be shipped.

        Args:
            order_id (str): The order to change.
            shipping_address (str): The new address, on one line.

        Returns:
            dict: {"success": True, "data": OrderInfo}, or {"success": False, "error": str}.
        """
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": "Order not found."}
        if order["status"] != "placed":
            return {"success": False, "error": f"Order {order_id} is {order['status']}."}
        if not shipping_address.strip():
            return {"success": False, "error": "The shipping address must not be blank."}
        order["shipping_address"] = shipping_address.strip()
        return {"success": True, "data": order}
